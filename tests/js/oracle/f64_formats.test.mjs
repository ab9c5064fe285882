// The f64 reference's block decoders against blocks packed by hand from docs/gguf.md's layouts
// (the C ABI exposes no dequantizer of the engine's to compare with). Each expected element is
// written as the format means it, d · (its sub-block's scale) · q − dmin · (its sub-block's min),
// and a few are spelled out as numbers.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {FORMATS} from "../support/f64_reference/formats.mjs";

const F16 = {"0.5": 0x3800, "0.25": 0x3400, "0.125": 0x3000, "2": 0x4000, "-1.5": 0xbe00};
const putF16 = (b, o, v) => { b[o] = F16[v] & 255; b[o + 1] = F16[v] >> 8; };
const decode = (type, bytes, n) => {
  const out = new Float64Array(n);
  FORMATS[type].decode(bytes, 0, out, n);
  return out;
};

// 8 six-bit scales and mins into the 12 bytes of docs/gguf.md "K-quants": j < 4 in the low six
// bits of bytes j and j + 4; j >= 4 as nibbles of byte j + 4, the top two bits in bytes j − 4 and j.
function packScales(b, o, sc, m) {
  for (let j = 0; j < 4; j++) { b[o + j] = sc[j]; b[o + j + 4] = m[j]; }
  for (let j = 4; j < 8; j++) {
    b[o + j + 4] = (sc[j] & 15) | ((m[j] & 15) << 4);
    b[o + j - 4] |= (sc[j] >> 4) << 6;
    b[o + j] |= (m[j] >> 4) << 6;
  }
}

// Scales and mins that use all six bits, and quants that differ from element to element.
const SC = [1, 2, 3, 63, 33, 17, 40, 5], MIN = [0, 7, 63, 1, 50, 9, 2, 34];
const quant = (e, levels) => (e * 7 + 3 + (e >> 5)) % levels;

// Q4_K / Q5_K: element 64c + l is the low nibble of qs[32c + l], 64c + 32 + l its high nibble;
// Q5_K's fifth bit of them is bit 2c, resp. 2c + 1, of qh[l].
function packK45(bits) {
  const b = new Uint8Array(bits === 4 ? 144 : 176), qs = bits === 4 ? 16 : 48;
  putF16(b, 0, "0.5");
  putF16(b, 2, "0.25");
  packScales(b, 4, SC, MIN);
  for (let e = 0; e < 256; e++) {
    const q = quant(e, 1 << bits), c = e >> 6, high = (e & 63) >= 32, l = e & 31;
    b[qs + 32 * c + l] |= high ? (q & 15) << 4 : q & 15;
    if (bits === 5) b[16 + l] |= (q >> 4) << (2 * c + (high ? 1 : 0));
  }
  return b;
}

describe("f64 reference block formats", () => {
  test("Q8_0 and Q4_0", () => {
    const q8 = new Uint8Array(34);
    putF16(q8, 0, "-1.5");
    q8[2] = 127; q8[3] = 0x80; q8[33] = 0xff;  // 127, −128, ..., −1
    assert.deepEqual([...decode(8, q8, 32)].filter((_, i) => [0, 1, 31].includes(i)), [-190.5, 192, 1.5]);
    const q4 = new Uint8Array(18);
    putF16(q4, 0, "2");
    q4[2] = 0xf0; q4[17] = 0x3c;  // element 0: 0, 16: 15, 15: 12, 31: 3
    const v = decode(2, q4, 32);
    assert.deepEqual([v[0], v[16], v[15], v[31]], [-16, 14, 8, -10]);
  });

  for (const [bits, type] of [[4, 12], [5, 13]]) {
    test(`Q${bits}_K: every element of a super-block`, () => {
      const v = decode(type, packK45(bits), 256);
      for (let e = 0; e < 256; e++) {
        const j = e >> 5;
        assert.equal(v[e], 0.5 * SC[j] * quant(e, 1 << bits) - 0.25 * MIN[j], `element ${e}`);
      }
      // by hand: element 0 is 0.5·1·3 − 0.25·0; element 255 (sub-block 7, q = 1795 mod 2^bits = 3)
      // is 0.5·5·3 − 0.25·34
      assert.equal(v[0], 1.5);
      assert.equal(v[255], -1);
    });
  }

  test("Q5_K: the fifth bit lands on the right elements", () => {
    // only element 64·2 + 32 + 5 = 165 has its fifth bit: bit 5 of qh[5]
    const b = new Uint8Array(176);
    putF16(b, 0, "0.5");
    packScales(b, 4, [1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]);
    b[16 + 5] = 1 << 5;
    const v = decode(13, b, 256);
    assert.deepEqual([...v.keys()].filter((e) => v[e] !== 0), [165]);
    assert.equal(v[165], 8);
  });

  test("Q6_K: every element, signed 16-element scales", () => {
    const b = new Uint8Array(210);
    const scales = Array.from({length: 16}, (_, s) => (s % 2 ? -1 : 1) * (3 * s + 1) % 128);
    scales[15] = -128;
    for (let s = 0; s < 16; s++) b[192 + s] = scales[s] & 255;
    putF16(b, 208, "0.125");
    // element 128h + 32i + l: a nibble of ql[64h + l + 32·(i mod 2)] (low for i < 2), its top two
    // bits at bits 2i of qh[32h + l]
    for (let e = 0; e < 256; e++) {
      const q = quant(e, 64), h = e >> 7, i = (e >> 5) & 3, l = e & 31;
      b[64 * h + l + 32 * (i & 1)] |= i < 2 ? q & 15 : (q & 15) << 4;
      b[128 + 32 * h + l] |= (q >> 4) << (2 * i);
    }
    const v = decode(14, b, 256);
    for (let e = 0; e < 256; e++) assert.equal(v[e], 0.125 * scales[e >> 4] * (quant(e, 64) - 32), `element ${e}`);
    // by hand: element 0 is 0.125 · 1 · (3 − 32); element 255 is 0.125 · −128 · (quant − 32)
    assert.equal(v[0], -3.625);
    assert.equal(v[255], 0.125 * -128 * (((255 * 7 + 3 + 7) % 64) - 32));
  });
});
