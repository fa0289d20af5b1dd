// The one quantity grammar of the QueenCluster API: the CRD refuses what it does not match (storage
// size, resources), and the operator reads what it matches. It is the grammar Kubernetes documents
// for resource.Quantity (a signed decimal number, then a binary suffix, a decimal suffix or a
// decimal exponent), every form of which the API server's own parser accepts with the same value.
// The API server also reads a few forms with no digits at all ("+", ".", "Gi", "e3", all zero),
// and trims spaces around a quantity it reads from JSON: those are refused here.
// test/e2e/quantities.test.ts runs the forms through the API server, the CRD and the parser.

/** The grammar, as a regular expression that Go's RE2 (the CRD's pattern and CEL) and JavaScript read alike. */
export const QUANTITY_PATTERN = '^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$';

/** The API server keeps no quantity of 2^63 or more (8Ei): larger ones are not read. */
export const QUANTITY_LIMIT = '8Ei';

const GRAMMAR = new RegExp(QUANTITY_PATTERN);

const BINARY: Record<string, bigint> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const LIMIT = 2n ** 63n;

/**
 * A quantity's value rounded up to a whole number away from zero, as Kubernetes' Quantity.Value()
 * reads it (1.5 is 2, 1m is 1), or NaN when the text is not in the grammar or the value is
 * 2^63 or more in magnitude. A number is taken as it is.
 */
export function parseQuantity(q: string | number | undefined | null): number {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return NaN;
  if (!GRAMMAR.test(q)) return NaN;
  const negative = q.startsWith('-');
  const body = q.replace(/^[+-]/, '');
  const numberText = /^[0-9]*([.][0-9]*)?/.exec(body)![0];
  const suffix = body.slice(numberText.length);
  const [whole = '', fraction = ''] = numberText.split('.');
  const digits = BigInt(`${whole}${fraction}` || '0');
  if (digits === 0n) return 0;
  let rounded: bigint;
  if (suffix in BINARY) {
    const den = 10n ** BigInt(fraction.length);
    rounded = (digits * 2n ** BINARY[suffix]! + den - 1n) / den;
  } else {
    // value = digits × 10^scale; the exponent may be huge either way, so the size is checked first.
    const scale = (suffix in DECIMAL ? DECIMAL[suffix]! : Number(suffix.slice(1))) - fraction.length;
    const width = digits.toString().length;
    if (width - 1 + scale >= 19) return NaN;
    if (scale >= 0) rounded = digits * 10n ** BigInt(scale);
    else if (-scale > width) rounded = 1n;
    else {
      const den = 10n ** BigInt(-scale);
      rounded = (digits + den - 1n) / den;
    }
  }
  if (rounded >= LIMIT) return NaN;
  return negative ? -Number(rounded) : Number(rounded);
}

/** What the CRD says of a value out of the grammar. */
export const QUANTITY_WORDS = 'must be a quantity such as 500m, 4Gi, 4G or 4e9';

/**
 * A quantity field of the CRD: an integer, or a string in the grammar. (A core type's Quantity
 * also takes a number with a fraction, which a CRD's schema cannot: write 0.5 as "0.5" or 500m.)
 */
export const quantitySchema = {
  'x-kubernetes-int-or-string': true,
  anyOf: [{ type: 'integer' }, { type: 'string' }],
  // Far longer than any quantity anyone writes; it bounds the cost of the CRD's CEL rules.
  maxLength: 64,
  'x-kubernetes-validations': [{ rule: `string(self).matches('${QUANTITY_PATTERN}')`, message: QUANTITY_WORDS }],
} as const;
