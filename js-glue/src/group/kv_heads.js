// A member's share of K/V rows across the group's edge (docs/tensor-parallel.md, "Shared KV
// across the group's edge"): a position's rows of a layer are the K rows of its KV heads 0 ..
// n_head_kv, then their V rows (protocol/kv_rows.js); a member takes or hands out those of its
// heads, the K rows of heads [begin, end), then their V rows.
import { firstNonFiniteKvByte } from '../protocol/kv_rows.js';
import { LayerfoldError } from '../wasm/capi.js';

/**
 * lf_member_needs_json's kv_rows_in or kv_rows_out -> [{layer, bytesPerToken (its heads'),
 * heads: [begin, end], nHeadKv, kRow, vRow}].
 * @example kvLayoutOf([{ layer: 13, bytes_per_token: 1024, heads: [0, 1], n_head_kv: 1, k_row: 512, v_row: 512 }])
 */
export function kvLayoutOf(list = []) {
  return list.map(({ layer, bytes_per_token: bytesPerToken, heads, n_head_kv: nHeadKv, k_row: kRow, v_row: vRow }) =>
    ({ layer, bytesPerToken, heads, nHeadKv, kRow, vRow }));
}

/**
 * kvLayoutOf of what a member's info frame states, or a bad_response error naming `who`.
 * @example member.kvLayout = { in: kvLayoutFromInfo(info.kv_rows_in, member.name), ... };
 */
export function kvLayoutFromInfo(list, who) {
  const count = (n) => Number.isSafeInteger(n) && n >= 0;
  const fine = (l) => l !== null && typeof l === 'object' && [l.layer, l.bytes_per_token, l.n_head_kv, l.k_row, l.v_row].every(count) &&
    Array.isArray(l.heads) && l.heads.length === 2 && l.heads.every(count) && l.heads[0] <= l.heads[1] && l.heads[1] <= l.n_head_kv &&
    l.bytes_per_token === (l.heads[1] - l.heads[0]) * (l.k_row + l.v_row);
  if (!Array.isArray(list ?? []) || !(list ?? []).every(fine)) {
    throw new LayerfoldError('bad_response', `${who}: its info's K/V rows are not [{layer, bytes_per_token, heads, n_head_kv, k_row, v_row}] that add up`);
  }
  return kvLayoutOf(list ?? []);
}

/**
 * Checks a member's K/V rows of n positions against its layout: every layer's, of its size,
 * their f16s finite (cache types {cacheTypeK, cacheTypeV}); else a bad_response naming `who`.
 * @example checkKvRows(kvRows, member.kvLayout.out, 5, member, member.name);
 */
export function checkKvRows(kvRows, layout, n, cacheTypes, who) {
  for (const { layer, bytesPerToken } of layout) {
    const rows = kvRows[layer];
    if (!rows || rows.byteLength !== n * bytesPerToken) {
      throw new LayerfoldError('bad_response', `${who}: layer ${layer}'s K/V rows hold ${rows?.byteLength ?? 0} bytes, expected ${n} positions x ${bytesPerToken}`);
    }
    const bad = bytesPerToken > 0 ? firstNonFiniteKvByte(rows, bytesPerToken, cacheTypes) : -1;
    if (bad >= 0) throw new LayerfoldError('bad_response', `${who}: layer ${layer}'s K/V rows hold a non-finite value at byte ${bad}`);
  }
  if (Object.keys(kvRows).length !== layout.length) throw new LayerfoldError('bad_response', `${who}: K/V rows of layers it does not hand out`);
  return kvRows;
}

/** kvLayoutOf's the other way, as a member's info frame states it. */
export function kvLayoutToWire(layout = []) {
  return layout.map(({ layer, bytesPerToken, heads, nHeadKv, kRow, vRow }) =>
    ({ layer, bytes_per_token: bytesPerToken, heads, n_head_kv: nHeadKv, k_row: kRow, v_row: vRow }));
}

// For each of n positions: the byte ranges of a member's heads in the whole row, and in its own.
function* headRuns({ heads: [begin, end], nHeadKv, kRow, vRow }, n) {
  const whole = nHeadKv * (kRow + vRow);
  const mine = (end - begin) * (kRow + vRow);
  for (let t = 0; t < n; t++) {
    yield { from: t * whole + begin * kRow, to: t * mine, bytes: (end - begin) * kRow };
    yield { from: t * whole + nHeadKv * kRow + begin * vRow, to: t * mine + (end - begin) * kRow, bytes: (end - begin) * vRow };
  }
}

/**
 * A layer's rows of every head for n positions -> the member's heads' (layout: one of kvLayoutOf's).
 * @example const mine = headsOf(rows[13], member.kvLayout.in[0], 5);
 */
export function headsOf(rows, layout, n) {
  const out = new Uint8Array(n * layout.bytesPerToken);
  for (const { from, to, bytes } of headRuns(layout, n)) out.set(rows.subarray(from, from + bytes), to);
  return out;
}

/**
 * Places a member's heads' rows of n positions (`mine`) into `rows`, the layer's rows of every head.
 * @example placeHeads(rows, mine, member.kvLayout.out[0], 5);
 */
export function placeHeads(rows, mine, layout, n) {
  for (const { from, to, bytes } of headRuns(layout, n)) rows.set(mine.subarray(to, to + bytes), from);
}
