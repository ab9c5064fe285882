// The soft tokens of an image of a given size, counted from the vision tower's config alone, as
// the engine counts them (src/vision/image_preprocess.cpp vision_input_size and its checks, in its
// f32 arithmetic; lf_vision_tokens): for a host that sends its images to an encoder node and must
// know each one's tokens before the answer comes (the prompt's length, its placeholders).
// The engine's longest side (src/vision/image_preprocess.h kMaxSide), vision/decode_image.js's too.
const MAX_IMAGE_SIDE = 46000;

const f32 = Math.fround;

/**
 * config (encode_body.js decodeEncoderInfo's vision, or gguf/projector_config.js visionConfig's {patchSize, nMerge, posSize, minTokens,
 * maxTokens}) and an image of width × height within a budget of maxTokens (0: the config's
 * maxTokens) -> {tokens, width, height}: the size it is resized to. A RangeError with the
 * engine's words for what it refuses (a budget out of range, a side of 0 or over 46000 pixels, a
 * patch grid wider than the position tables).
 * @example imageTokens({ patchSize: 16, nMerge: 3, posSize: 10240, minTokens: 70, maxTokens: 1120 }, 1000, 700, { maxTokens: 280 }) // { tokens: 266, ... }
 */
export function imageTokens(config, width, height, { maxTokens = 0 } = {}) {
  const budget = maxTokens || config.maxTokens;
  if (budget < config.minTokens || budget > config.maxTokens) {
    throw new RangeError(`an image's token budget must be ${config.minTokens} to ${config.maxTokens}, not ${maxTokens}`);
  }
  if (!(width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE)) {
    throw new RangeError(`the image is ${width} x ${height}; each side must be 1 to ${MAX_IMAGE_SIDE} pixels`);
  }
  const align = config.patchSize * config.nMerge;
  const minPixels = config.minTokens * align * align;
  const maxPixels = budget * align * align;
  const roundTo = (x) => Math.round(f32(x / align)) * align;
  const ceilTo = (x) => Math.ceil(f32(x / align)) * align;
  const floorTo = (x) => Math.floor(f32(x / align)) * align;
  let w = Math.max(align, roundTo(width));
  let h = Math.max(align, roundTo(height));
  if (h * w > maxPixels) {
    const beta = f32(Math.sqrt(f32(f32(f32(height) * width) / maxPixels)));
    h = Math.max(align, floorTo(f32(height / beta)));
    w = Math.max(align, floorTo(f32(width / beta)));
  } else if (h * w < minPixels) {
    const beta = f32(Math.sqrt(f32(f32(minPixels) / f32(f32(height) * width))));
    h = ceilTo(f32(height * beta));
    w = ceilTo(f32(width * beta));
  }
  const grid = [w / config.patchSize, h / config.patchSize].map(Math.floor);
  if (grid[0] > config.posSize || grid[1] > config.posSize) {
    throw new RangeError(`the image's patch grid ${grid[0]} x ${grid[1]} is wider than the position tables (${config.posSize})`);
  }
  return { tokens: Math.floor(grid[0] / config.nMerge) * Math.floor(grid[1] / config.nMerge), width: w, height: h };
}
