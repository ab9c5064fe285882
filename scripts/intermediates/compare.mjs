// Our intermediates against llama.cpp's, tensor by tensor in the order the layer computes them
// (scripts/compare-intermediates writes both directories).
//
//   node compare.mjs LLAMA_DIR OURS_DIR
//
// Rows are aligned from the last one: on the last layer we carry only the last row past the
// attention (last_only), where llama.cpp's taps may hold every row.
import fs from "node:fs";

// our debug-hook name -> llama.cpp's graph name (src/models/gemma4.cpp, build_ffn's cb names)
const PAIRS = [
  ["attn_norm", "attn_norm"], ["q_rope", "Qcur_pos"], ["k_rope", "Kcur_pos"], ["v_normed", "Vcur_normed"],
  ["attn_out", "kqv_out"], ["attn_residual", "attn_out"], ["ffn_out", "ffn_out"], ["layer_out", "l_out"],
];
// Model-level intermediates (layer -1), where the model has them: E2B/E4B's per-layer inputs.
const MODEL_PAIRS = [["inp_per_layer", "inp_per_layer"]];

function read(file) {
  const b = fs.readFileSync(file);
  const ne = Array.from(new BigInt64Array(b.buffer.slice(b.byteOffset, b.byteOffset + 32)), Number);
  return {ne, x: new Float32Array(b.buffer.slice(b.byteOffset + 32, b.byteOffset + b.length))};
}

// -> {n, differing, maxRel, firstRow}: |Δ| relative to the row's largest |value|
function compare(ours, theirs) {
  const width = ours.ne[0], rows = ours.x.length / width, skip = theirs.x.length - ours.x.length;
  let differing = 0, maxRel = 0, firstRow = -1;
  for (let r = 0; r < rows; r++) {
    let scale = 0;
    for (let j = 0; j < width; j++) scale = Math.max(scale, Math.abs(theirs.x[skip + r * width + j]));
    for (let j = 0; j < width; j++) {
      const a = ours.x[r * width + j], b = theirs.x[skip + r * width + j];
      if (Object.is(a, b)) continue;
      differing++;
      if (firstRow < 0) firstRow = r + skip / width;
      maxRel = Math.max(maxRel, Math.abs(a - b) / (scale || 1));
    }
  }
  return {n: ours.x.length, differing, maxRel, firstRow};
}

const [llamaDir, oursDir] = process.argv.slice(2);
let first = null;
for (const [ours, theirs] of MODEL_PAIRS) {
  const fo = `${oursDir}/${ours}--1.bin`, ft = `${llamaDir}/${theirs}.bin`;
  if (!fs.existsSync(fo) || !fs.existsSync(ft)) continue;
  const c = compare(read(fo), read(ft));
  if (c.differing > 0 && first === null) first = ours;
  console.log(`model    ${ours.padEnd(13)} vs ${theirs.padEnd(11)}  ${String(c.differing).padStart(6)} of ${String(c.n).padStart(6)} differ` +
              (c.differing ? `, max |Δ|/max|x| ${c.maxRel.toExponential(2)}, first in row ${c.firstRow}` : ""));
}
for (let il = 0; fs.existsSync(`${oursDir}/attn_norm-${il}.bin`); il++) {
  for (const [ours, theirs] of PAIRS) {
    const fo = `${oursDir}/${ours}-${il}.bin`, ft = `${llamaDir}/${theirs}-${il}.bin`;
    if (!fs.existsSync(fo) || !fs.existsSync(ft)) continue;
    const c = compare(read(fo), read(ft));
    if (c.differing > 0 && first === null) first = `${ours}-${il}`;
    console.log(`layer ${il}  ${ours.padEnd(13)} vs ${theirs.padEnd(11)}  ${String(c.differing).padStart(6)} of ${String(c.n).padStart(6)} differ` +
                (c.differing ? `, max |Δ|/max|x| ${c.maxRel.toExponential(2)}, first in row ${c.firstRow}` : ""));
  }
}
const c = compare(read(`${oursDir}/final_logits.bin`), read(`${llamaDir}/final_logits.bin`));
console.log(`logits: ${c.differing} of ${c.n} differ${c.differing ? `, max |Δ|/max|x| ${c.maxRel.toExponential(2)}` : ""}`);
console.log(`first differing tensor: ${first ?? "none"}`);
