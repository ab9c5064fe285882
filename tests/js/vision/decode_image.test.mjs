// Image files into the vision tower's RGB pixels (js-glue/src/vision/decode_image.js): every PNG
// color type as stb_image reads it with 3 channels, JPEG and WebP through their codecs, and files
// that are bombs, corrupt, truncated or of another format refused by what is wrong before they
// cost memory.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";
import {pathToFileURL} from "node:url";

import {decodeImage, ImageError} from "../../../js-glue/src/vision/decode_image.js";
import {loadWebpDecoder} from "../../../js-glue/src/vision/webp_node.js";
import {importHostPackage} from "../support/host_package.mjs";
import {root} from "../support/models.mjs";

const {encode: encodePng} = await importHostPackage("fast-png");
const jpeg = (await importHostPackage("jpeg-js")).default;
// the encoder's module and WASM, by path: the package's index would fetch() them
const webpPackage = path.join(root, "js-glue", "node_modules", "@jsquash", "webp");
const {init: initWebpEncoder, default: encodeWebp} = await import(pathToFileURL(path.join(webpPackage, "encode.js")).href);
await initWebpEncoder(await WebAssembly.compile(fs.readFileSync(path.join(webpPackage, "codec", "enc", "webp_enc.wasm"))));
await loadWebpDecoder();
const toWebp = async (width, height, rgba, options) =>
  new Uint8Array(await encodeWebp({width, height, data: new Uint8ClampedArray(rgba), colorSpace: "srgb"}, options));

const W = 5, H = 3;
const pixels = (channels, max = 255) => Uint8Array.from({length: W * H * channels}, (_, i) => (i * 53 + 7) % (max + 1));

// The IHDR's width and height set to w and h (the CRC left stale: the size is read first).
function withSize(png, w, h) {
  const out = Uint8Array.from(png);
  const view = new DataView(out.buffer);
  view.setUint32(16, w);
  view.setUint32(20, h);
  return out;
}

describe("decodeImage", () => {
  test("PNG: RGB as is, alpha dropped, gray repeated, 16-bit samples' high byte, palettes looked up", async () => {
    const rgb = pixels(3);
    assert.deepEqual(await decodeImage(encodePng({width: W, height: H, data: rgb, channels: 3, depth: 8})),
      {width: W, height: H, rgb});

    const rgba = pixels(4);
    const dropped = Uint8Array.from({length: W * H * 3}, (_, i) => rgba[Math.floor(i / 3) * 4 + (i % 3)]);
    assert.deepEqual((await decodeImage(encodePng({width: W, height: H, data: rgba, channels: 4, depth: 8}))).rgb, dropped);

    const gray = pixels(1);
    const repeated = Uint8Array.from({length: W * H * 3}, (_, i) => gray[Math.floor(i / 3)]);
    assert.deepEqual((await decodeImage(encodePng({width: W, height: H, data: gray, channels: 1, depth: 8}))).rgb, repeated);

    const grayAlpha = pixels(2);
    const grayOnly = Uint8Array.from({length: W * H * 3}, (_, i) => grayAlpha[Math.floor(i / 3) * 2]);
    assert.deepEqual((await decodeImage(encodePng({width: W, height: H, data: grayAlpha, channels: 2, depth: 8}))).rgb, grayOnly);

    const wide = Uint16Array.from({length: W * H * 3}, (_, i) => (i * 4099 + 11) % 65536);
    assert.deepEqual((await decodeImage(encodePng({width: W, height: H, data: wide, channels: 3, depth: 16}))).rgb,
      Uint8Array.from(wide, (v) => v >> 8));

    const palette = [[10, 20, 30], [200, 100, 0], [1, 2, 3]];
    const indexes = Uint8Array.from({length: W * H}, (_, i) => i % 3);
    assert.deepEqual((await decodeImage(encodePng({width: W, height: H, data: indexes, channels: 1, depth: 8, palette}))).rgb,
      Uint8Array.from({length: W * H * 3}, (_, i) => palette[Math.floor(i / 3) % 3][i % 3]));
  });

  test("PNG: gray of 1, 2 and 4 bits scaled to 0..255, rows padded to whole bytes", async () => {
    for (const depth of [1, 2, 4]) {
      const levels = (1 << depth) - 1;
      const values = Uint8Array.from({length: W * H}, (_, i) => (i * 3) % (levels + 1));
      // packed rows, high bits first
      const rowBytes = Math.ceil((W * depth) / 8);
      const packed = new Uint8Array(rowBytes * H);
      values.forEach((v, i) => {
        const x = i % W, y = Math.floor(i / W), bit = x * depth;
        packed[y * rowBytes + (bit >> 3)] |= v << (8 - depth - (bit & 7));
      });
      const {rgb} = await decodeImage(encodePng({width: W, height: H, data: packed, channels: 1, depth}));
      assert.deepEqual(rgb, Uint8Array.from({length: W * H * 3}, (_, i) => (values[Math.floor(i / 3)] * 255) / levels),
        `depth ${depth}`);
    }
  });

  test("JPEG: decoded to its size, within the codec's loss of the original", async () => {
    const w = 40, h = 24;
    const rgba = Uint8Array.from({length: w * h * 4}, (_, i) => (i % 4 === 3 ? 255 : Math.floor((255 * (Math.floor(i / 4) % w)) / w)));
    const {width, height, rgb} = await decodeImage(jpeg.encode({width: w, height: h, data: rgba}, 100).data);
    assert.deepEqual([width, height, rgb.length], [w, h, w * h * 3]);
    let worst = 0;
    for (let p = 0; p < w * h; p++) for (let c = 0; c < 3; c++) worst = Math.max(worst, Math.abs(rgb[3 * p + c] - rgba[4 * p + c]));
    assert.ok(worst <= 8, `largest difference ${worst}`);
  });

  test("WebP: lossless exactly, alpha dropped; lossy within the codec's loss", async () => {
    const rgba = pixels(4);
    const dropped = Uint8Array.from({length: W * H * 3}, (_, i) => rgba[Math.floor(i / 3) * 4 + (i % 3)]);
    // lossless keeps the color of pixels whatever their alpha (exact: 1)
    assert.deepEqual(await decodeImage(await toWebp(W, H, rgba, {lossless: 1, exact: 1})), {width: W, height: H, rgb: dropped});
    const w = 32, h = 16;
    const smooth = Uint8Array.from({length: w * h * 4}, (_, i) => (i % 4 === 3 ? 255 : 100 + ((i >> 2) % w)));
    const {width, height, rgb} = await decodeImage(await toWebp(w, h, smooth, {quality: 95}));
    assert.deepEqual([width, height], [w, h]);
    let worst = 0;
    for (let p = 0; p < w * h; p++) for (let c = 0; c < 3; c++) worst = Math.max(worst, Math.abs(rgb[3 * p + c] - smooth[4 * p + c]));
    assert.ok(worst <= 12, `largest difference ${worst}`);
  });

  test("bombs and oversized images are refused from their header, before decoding", async () => {
    const small = encodePng({width: W, height: H, data: pixels(3), channels: 3, depth: 8});
    await assert.rejects(decodeImage(withSize(small, 30000, 30000)),
      {name: "ImageError", message: "the image is 30000 x 30000 = 900000000 pixels, over the limit of 50000000"});
    await assert.rejects(decodeImage(withSize(small, 50000, 10)), /the image is 50000 x 10; each side must be 1 to 46000 pixels/);
    await assert.rejects(decodeImage(small, {maxPixels: 14}), /the image is 5 x 3 = 15 pixels, over the limit of 14/);
    // a JPEG whose frame header claims 30000 x 30000
    const big = Uint8Array.from(jpeg.encode({width: 8, height: 8, data: new Uint8Array(256).fill(90)}, 80).data);
    const sof = big.findIndex((b, i) => b === 0xff && big[i + 1] === 0xc0);
    new DataView(big.buffer).setUint16(sof + 5, 30000);
    new DataView(big.buffer).setUint16(sof + 7, 30000);
    await assert.rejects(decodeImage(big), /30000 x 30000 = 900000000 pixels, over the limit/);
  });

  test("corrupt, truncated and foreign files are refused by what is wrong", async () => {
    const png = encodePng({width: W, height: H, data: pixels(3), channels: 3, depth: 8});
    const corrupt = Uint8Array.from(png);
    corrupt[png.length - 20] ^= 0xff;  // inside the image data: its CRC no longer holds
    await assert.rejects(decodeImage(corrupt), /^ImageError: the PNG image could not be decoded: /);
    await assert.rejects(decodeImage(png.subarray(0, png.length - 16)), /the PNG image could not be decoded/);
    const jpg = jpeg.encode({width: 16, height: 16, data: new Uint8Array(1024).fill(120)}, 90).data;
    await assert.rejects(decodeImage(jpg.subarray(0, jpg.length - 40)), /the JPEG image could not be decoded/);
    await assert.rejects(decodeImage(new TextEncoder().encode("GIF89a\x05\x00\x03\x00\x80\x00\x00")),
      /gif images are not supported: JPEG, PNG and WebP are/);
    const lossy = await toWebp(16, 16, new Uint8Array(1024).fill(77), {quality: 80});
    await assert.rejects(decodeImage(lossy.subarray(0, lossy.length - 10)), /the WebP image could not be decoded/);
    await assert.rejects(decodeImage(new Uint8Array([1, 2, 3])), ImageError);
    await assert.rejects(decodeImage(new TextEncoder().encode("hello, world")), /not an image this engine reads/);
  });
});
