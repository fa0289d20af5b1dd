// The words users read are formatted one way everywhere.
import { describe, expect, it } from 'vitest';
import { goDuration, idsText, lagText, parseQuantity, podsText, quantityText } from '../../plan/format.ts';

describe('formatting', () => {
  it.each([
    [30_000, '30s'],
    [60_000, '1m0s'],
    [90_000, '1m30s'],
    [3_723_000, '1h2m3s'],
    [0, '0s'],
    [500, '500ms'],
  ])('goDuration(%i) = %s', (ms, text) => expect(goDuration(ms)).toBe(text));
  it('names nodes and pods as the README does', () => {
    expect(idsText([4])).toBe('node 4');
    expect(idsText([4, 5])).toBe('nodes 4 and 5');
    expect(idsText([3, 4, 5])).toBe('nodes 3, 4 and 5');
    expect(podsText([2, 1, 0])).toBe('pods 2, 1 and 0');
    expect(lagText(72)).toBe(' (72 entries behind)');
    expect(lagText(1)).toBe(' (1 entry behind)');
    expect(lagText(null)).toBe('');
  });
  it('reads and prints quantities', () => {
    expect(parseQuantity('50Gi')).toBe(50 * 1024 ** 3);
    expect(parseQuantity('1.5Gi')).toBe(1536 * 1024 ** 2);
    expect(parseQuantity('100M')).toBe(100e6);
    expect(parseQuantity('abc')).toBeNaN();
    expect(quantityText(1536 * 1024 ** 2)).toBe('1536Mi');
    expect(quantityText(100 * 1024 ** 3)).toBe('100Gi');
  });
});
