// ggml's weight formats decoded to f64: each element is the real number its block stores
// (docs/gguf.md, "Block formats" and "K-quants"). ggml forms d·scale and d·scale·q in f32; here
// the products are exact, so the reference computes the quantized model itself, not one
// engine's rounding of it.
//
// Example:
//   const f = FORMATS[12];                       // Q4_K
//   const row = new Float64Array(256);
//   f.decode(bytes, 0, row, 256);                // one 144-byte super-block

const F16 = new Float64Array(65536);
for (let h = 0; h < 65536; h++) {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  F16[h] = e === 0 ? sign * m * 2 ** -24 : e === 31 ? (m ? NaN : sign * Infinity) : sign * (1 + m / 1024) * 2 ** (e - 15);
}
const f16 = (b, o) => F16[b[o] | (b[o + 1] << 8)];

// Q4_K and Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes at s
// (llama.cpp's get_scale_min_k4): j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split
// between a nibble of byte j + 4 and the top 2 bits of bytes j - 4 (scale) and j (min).
function scaleMin(b, s, j) {
  if (j < 4) return [b[s + j] & 63, b[s + j + 4] & 63];
  return [(b[s + j + 4] & 15) | ((b[s + j - 4] >> 6) << 4), (b[s + j + 4] >> 4) | ((b[s + j] >> 6) << 4)];
}

// Q4_K (bits 4) and Q5_K (bits 5): 4 chunks of 64; chunk c holds sub-blocks 2c (low nibbles of
// qs[32c..32c+31]) and 2c + 1 (their high nibbles); Q5_K's fifth bit of those elements is bit 2c
// and 2c + 1 of qh[l].
function decodeK45(bits) {
  const qsAt = bits === 4 ? 16 : 48, size = bits === 4 ? 144 : 176;
  return (b, o, out, n) => {
    for (let k = 0; k < n; k += 256, o += size) {
      const d = f16(b, o), dmin = f16(b, o + 2);
      for (let c = 0; c < 4; c++) {
        const [s1, m1] = scaleMin(b, o + 4, 2 * c), [s2, m2] = scaleMin(b, o + 4, 2 * c + 1);
        for (let l = 0; l < 32; l++) {
          const q = b[o + qsAt + 32 * c + l], h = bits === 5 ? b[o + 16 + l] >> (2 * c) : 0;
          out[k + 64 * c + l] = d * s1 * ((q & 15) + 16 * (h & 1)) - dmin * m1;
          out[k + 64 * c + 32 + l] = d * s2 * ((q >> 4) + 16 * ((h >> 1) & 1)) - dmin * m2;
        }
      }
    }
  };
}

// Q6_K: two halves of 128; in half h, ql = 64h.., qh = 128 + 32h.., scales (int8) = 192 + 8h..;
// element 32i + l (i < 4) takes a nibble of ql[l + 32·(i & 1)] (low for i < 2) and 2 bits of qh[l].
function decodeQ6K(b, o, out, n) {
  for (let k = 0; k < n; k += 256, o += 210) {
    const d = f16(b, o + 208);
    for (let h = 0; h < 2; h++) {
      const ql = o + 64 * h, qh = o + 128 + 32 * h, sc = o + 192 + 8 * h;
      for (let l = 0; l < 32; l++) {
        for (let i = 0; i < 4; i++) {
          const nibble = i < 2 ? b[ql + l + 32 * i] & 15 : b[ql + l + 32 * (i - 2)] >> 4;
          const q = nibble | (((b[qh + l] >> (2 * i)) & 3) << 4);
          const scale = (b[sc + Math.floor(l / 16) + 2 * i] << 24) >> 24;
          out[k + 128 * h + 32 * i + l] = d * scale * (q - 32);
        }
      }
    }
  }
}

/** ggml type id -> {name, block (elements), bytes (per block), decode(bytes, offset, out, n)} */
export const FORMATS = {
  0: {name: "F32", block: 1, bytes: 4, decode(b, o, out, n) {
    const v = new DataView(b.buffer, b.byteOffset + o, 4 * n);
    for (let i = 0; i < n; i++) out[i] = v.getFloat32(4 * i, true);
  }},
  1: {name: "F16", block: 1, bytes: 2, decode(b, o, out, n) {
    for (let i = 0; i < n; i++) out[i] = f16(b, o + 2 * i);
  }},
  30: {name: "BF16", block: 1, bytes: 2, decode(b, o, out, n) {
    // bf16 is the top half of an f32
    const f = new Float32Array(1), u = new Uint32Array(f.buffer);
    for (let i = 0; i < n; i++) { u[0] = (b[o + 2 * i] | (b[o + 2 * i + 1] << 8)) << 16; out[i] = f[0]; }
  }},
  8: {name: "Q8_0", block: 32, bytes: 34, decode(b, o, out, n) {
    for (let k = 0; k < n; k += 32, o += 34) {
      const d = f16(b, o);
      for (let j = 0; j < 32; j++) out[k + j] = d * ((b[o + 2 + j] << 24) >> 24);
    }
  }},
  2: {name: "Q4_0", block: 32, bytes: 18, decode(b, o, out, n) {
    // element j < 16 the low nibble of byte j, j >= 16 the high nibble of byte j - 16
    for (let k = 0; k < n; k += 32, o += 18) {
      const d = f16(b, o);
      for (let j = 0; j < 16; j++) {
        out[k + j] = d * ((b[o + 2 + j] & 15) - 8);
        out[k + 16 + j] = d * ((b[o + 2 + j] >> 4) - 8);
      }
    }
  }},
  12: {name: "Q4_K", block: 256, bytes: 144, decode: decodeK45(4)},
  13: {name: "Q5_K", block: 256, bytes: 176, decode: decodeK45(5)},
  14: {name: "Q6_K", block: 256, bytes: 210, decode: decodeQ6K},
};
