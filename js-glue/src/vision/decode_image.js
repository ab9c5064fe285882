// An image file's bytes as the RGB pixels the vision tower reads, as llama.cpp's mtmd loads a
// file (stb_image asked for 3 channels): alpha dropped, gray repeated in R, G and B, a 16-bit
// sample's high byte, sub-byte gray scaled to 0..255. The size is read from the header first
// (image-size) and refused before anything is decoded when a side is over 46000 pixels or the
// pixels are over the caller's limit, so a decompression bomb costs nothing. Decoders: jpeg-js
// and fast-png (every chunk's CRC checked: a flipped byte is refused, not decoded), plain JS that
// runs in Node and in workerd alike, and libwebp as @jsquash/webp builds it to WASM, whose
// compiled module the host hands over (useWebpDecoder: a Node host reads it from the package,
// a worker imports it). stb_image reads no WebP, so mtmd takes none; WebP's alpha is dropped too.
import decodeWebp, { init as initWebpDecoder } from '@jsquash/webp/decode.js';
import { convertIndexedToRgb, decode as decodePng } from 'fast-png';
import { imageSize } from 'image-size';
import jpeg from 'jpeg-js';

export const MAX_IMAGE_SIDE = 46000;
/** Pixels an image may have unless the caller says otherwise: 50 megapixels, 150 MB as RGB. */
export const DEFAULT_MAX_IMAGE_PIXELS = 50_000_000;

const FORMATS = { png: 'PNG', jpg: 'JPEG', webp: 'WebP' };

let webpDecoder = null;  // libwebp's module, once the host handed it over

/** An image the engine cannot read: `message` says why, for a 400. */
export class ImageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ImageError';
    this.code = 'invalid_image';
  }
}

/**
 * The WebP decoder's compiled WASM (@jsquash/webp's codec/dec/webp_dec.wasm): WebP images decode
 * once it is given.
 * @example useWebpDecoder(await WebAssembly.compile(fs.readFileSync(webpWasmPath)));
 */
export function useWebpDecoder(module) {
  webpDecoder = initWebpDecoder(module);
}

/**
 * bytes (a JPEG, PNG or WebP file) -> { width, height, rgb: Uint8Array [height · width · 3] };
 * rejects with ImageError naming what is wrong: not an image, a format it does not read, a size
 * over the limits (before decoding), a corrupt or truncated file.
 * @example const { width, height, rgb } = await decodeImage(fs.readFileSync('photo.jpg'));
 */
export async function decodeImage(bytes, { maxPixels = DEFAULT_MAX_IMAGE_PIXELS } = {}) {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let size;
  try {
    size = imageSize(view);
  } catch (error) {
    throw new ImageError(`the data is not an image this engine reads (JPEG, PNG or WebP): ${error.message}`);
  }
  const { type, width, height } = size;
  const format = FORMATS[type];
  if (!format) throw new ImageError(`${type} images are not supported: JPEG, PNG and WebP are`);
  if (format === 'WebP' && !webpDecoder) throw new ImageError('this host has no WebP decoder (useWebpDecoder)');
  if (!(width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE)) {
    throw new ImageError(`the image is ${width} x ${height}; each side must be 1 to ${MAX_IMAGE_SIDE} pixels`);
  }
  if (width * height > maxPixels) {
    throw new ImageError(`the image is ${width} x ${height} = ${width * height} pixels, over the limit of ${maxPixels}`);
  }
  let image;
  try {
    if (format === 'PNG') image = pngToRgb(decodePng(view, { checkCrc: true }));
    else if (format === 'JPEG') image = jpegToRgb(view, maxPixels);
    else image = await webpToRgb(view);
  } catch (error) {
    throw new ImageError(`the ${format} image could not be decoded: ${error.message}`);
  }
  if (image.width !== width || image.height !== height) {
    throw new ImageError(`the ${format} image decoded to ${image.width} x ${image.height}, its header says ${width} x ${height}`);
  }
  return image;
}

function jpegToRgb(bytes, maxPixels) {
  // jpeg-js's own limits again, in case its frame header disagrees with the one image-size read
  const { width, height, data } = jpeg.decode(bytes, {
    useTArray: true, formatAsRGBA: false, maxResolutionInMP: maxPixels / 1e6, maxMemoryUsageInMB: 3 * maxPixels / 1e6 + 64,
  });
  return { width, height, rgb: data };
}

async function webpToRgb(bytes) {
  await webpDecoder;
  const { width, height, data } = await decodeWebp(bytes.slice().buffer);
  return { width, height, rgb: rgbOf(width * height, 4, (k) => data[k]) };
}

function pngToRgb(png) {
  const { width, height, channels, depth } = png;
  const n = width * height;
  if (png.palette) {
    const colors = convertIndexedToRgb(png);
    return { width, height, rgb: rgbOf(n, png.palette[0].length, (k) => colors[k]) };
  }
  return { width, height, rgb: rgbOf(n, channels, samplesOf(png.data, width, channels, depth)) };
}

// n pixels of `channels` 8-bit samples (sample(pixel · channels + channel)) as RGB: the first
// three channels, or one gray channel repeated; alpha dropped.
function rgbOf(n, channels, sample) {
  const rgb = new Uint8Array(3 * n);
  const color = channels >= 3;
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < 3; c++) rgb[3 * i + c] = sample(i * channels + (color ? c : 0));
  }
  return rgb;
}

// The decoded samples as 8-bit values by index (pixel · channels + channel).
function samplesOf(data, width, channels, depth) {
  if (depth === 8) return (k) => data[k];
  if (depth === 16) return (k) => data[k] >> 8;
  // gray of 1, 2 or 4 bits, packed from each row's high bits, rows padded to whole bytes
  const rowBytes = Math.ceil((depth * channels * width) / 8);
  const scale = 255 / ((1 << depth) - 1);
  return (k) => {
    const x = k % width, y = Math.floor(k / width);
    const bit = x * depth;
    const byte = data[y * rowBytes + (bit >> 3)];
    return ((byte >> (8 - depth - (bit & 7))) & ((1 << depth) - 1)) * scale;
  };
}
