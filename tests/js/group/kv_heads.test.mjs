// A member's share of K/V rows across the group's edge (group/kv_heads.js): each member's heads
// cut from a position's rows of every head (K rows of the heads, then V rows) and put back
// together give those rows, for members of no heads too; a member's rows of the wrong size,
// with a non-finite f16 or of a layer it does not hand out, and a layout that does not add up,
// are refused naming the member.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {checkKvRows, headsOf, kvLayoutFromInfo, placeHeads} from "../../../js-glue/src/group/kv_heads.js";

const wire = (heads, {nHeadKv = 4, kRow = 6, vRow = 10} = {}) =>
  ({layer: 7, bytes_per_token: (heads[1] - heads[0]) * (kRow + vRow), heads, n_head_kv: nHeadKv, k_row: kRow, v_row: vRow});

describe("a member's heads of K/V rows", () => {
  test("cut per member and put back together, they are the rows of every head", () => {
    const n = 3;
    const rows = Uint8Array.from({length: n * 4 * 16}, (_, i) => (i * 7 + 3) % 251);
    const layouts = kvLayoutFromInfo([wire([0, 1]), wire([1, 1]), wire([1, 4])], "test");
    const parts = layouts.map((layout) => headsOf(rows, layout, n));
    assert.deepEqual(parts.map((p) => p.byteLength), [n * 16, 0, n * 48]);
    // Member 0's first position: head 0's K row, then its V row.
    assert.deepEqual([...parts[0].subarray(0, 16)], [...rows.subarray(0, 6), ...rows.subarray(24, 34)]);
    const back = new Uint8Array(rows.byteLength);
    layouts.forEach((layout, i) => placeHeads(back, parts[i], layout, n));
    assert.deepEqual(back, rows);
  });

  test("refused by name: rows of the wrong size, a non-finite f16, another layer, a layout that does not add up", () => {
    const [layout] = kvLayoutFromInfo([wire([0, 2], {kRow: 64, vRow: 64})], "test");
    const good = new Uint8Array(2 * layout.bytesPerToken);
    assert.equal(checkKvRows({7: good}, [layout], 2, {}, "member 1").constructor, Object);
    assert.throws(() => checkKvRows({7: good.subarray(1)}, [layout], 2, {}, "member 1"), /member 1: layer 7's K\/V rows hold 511 bytes, expected 2 positions x 256/);
    const nan = good.slice();
    nan[300] = 0x00;
    nan[301] = 0x7e;
    assert.throws(() => checkKvRows({7: nan}, [layout], 2, {}, "member 1"), /member 1: layer 7's K\/V rows hold a non-finite value at byte 300/);
    assert.throws(() => checkKvRows({7: good, 9: good}, [layout], 2, {}, "member 1"), /K\/V rows of layers it does not hand out/);
    assert.throws(() => kvLayoutFromInfo([{...wire([0, 2]), bytes_per_token: 5}], "member 2"), /member 2: its info's K\/V rows/);
    assert.throws(() => kvLayoutFromInfo([wire([3, 5])], "member 2"), /member 2: its info's K\/V rows/);
  });
});
