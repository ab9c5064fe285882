// A projector GGUF's ("mmproj") towers as their keys and tensor shapes describe them, read as the
// engine reads them (src/vision/vision_config.cpp, src/audio/audio_config.cpp; docs/vision.md and
// docs/audio.md, "Keys"): what a host that does not hold the towers needs to know of them, to
// count an item's soft tokens (protocol/image_tokens.js, protocol/clip_tokens.js) and to size them
// (cli/encoder_memory.js). The engine stays the judge of a file: opening a tower checks every key
// and tensor, which this does not repeat.

// llama.cpp's budget of one image, in soft tokens (docs/vision.md, "Preprocessing").
export const IMAGE_MIN_TOKENS = 70;
export const IMAGE_MAX_TOKENS = 1120;

const key = (metadata, name, fallback) => metadata[`clip.${name}`] ?? fallback;
const tensor = (header, name) => header.tensors.find((t) => t.name === name) ?? null;

/**
 * The vision tower of a projector's header (openGgufHeader's) -> {nEmbd, nFf, nLayer, nHead,
 * headDim, patchSize, nMerge, posSize, nEmbdText, minTokens, maxTokens}, or null when the file
 * declares none.
 * @example visionConfig(header) // { nEmbd: 768, nLayer: 16, patchSize: 16, nMerge: 3, posSize: 10240, nEmbdText: 1536, ... }
 */
export function visionConfig(header) {
  const m = header.metadata;
  if (m['clip.has_vision_encoder'] !== true) return null;
  const nEmbd = key(m, 'vision.embedding_length');
  const nHead = key(m, 'vision.attention.head_count');
  return {
    nEmbd, nFf: key(m, 'vision.feed_forward_length'), nLayer: key(m, 'vision.block_count'), nHead,
    headDim: key(m, 'vision.attention.head_dim', Math.floor(nEmbd / nHead)),
    patchSize: key(m, 'vision.patch_size'), nMerge: key(m, 'vision.projector.scale_factor', 3),
    posSize: tensor(header, 'v.position_embd.weight')?.ne[1] ?? 0, nEmbdText: key(m, 'vision.projection_dim'),
    minTokens: IMAGE_MIN_TOKENS, maxTokens: IMAGE_MAX_TOKENS,
  };
}

/**
 * The audio encoder of a projector's header -> {nEmbd, nFf, nLayer, nHead, headDim, nMel,
 * convChannels: [c0, c1], nEmbdOut, nEmbdText}, or null when the file has none (26B-A4B, 31B).
 * @example audioConfig(header) // { nEmbd: 1024, nLayer: 12, nHead: 8, headDim: 128, nMel: 128, convChannels: [128, 32], ... }
 */
export function audioConfig(header) {
  const m = header.metadata;
  if (m['clip.has_audio_encoder'] !== true) return null;
  const nEmbd = key(m, 'audio.embedding_length');
  const nHead = key(m, 'audio.attention.head_count');
  return {
    nEmbd, nFf: key(m, 'audio.feed_forward_length'), nLayer: key(m, 'audio.block_count'), nHead,
    headDim: key(m, 'audio.attention.head_dim', Math.floor(nEmbd / nHead)), nMel: key(m, 'audio.num_mel_bins'),
    convChannels: [0, 1].map((i) => tensor(header, `a.conv1d.${i}.weight`)?.ne[3] ?? 0),
    nEmbdOut: tensor(header, 'a.pre_encode.out.weight')?.ne[1] ?? nEmbd, nEmbdText: key(m, 'audio.projection_dim'),
  };
}
