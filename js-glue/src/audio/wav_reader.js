// A RIFF/WAVE file's samples as f32, per channel, scaled as miniaudio's dr_wav scales them when
// mtmd-helper asks its decoder for f32 (ma_dr_wav_read_pcm_frames_f32): unsigned 8-bit
// x · f32(2/255) − 1, 16-bit x / 32768, 24-bit x / 2^23, 32-bit x / 2^31, float as it is (64-bit
// rounded to f32). Hand-written: RIFF's header is a few fields, the npm WAV parsers are unkept or
// many times this size, and the scaling has to be dr_wav's, which none of them does. Only PCM of
// 8, 16, 24 or 32 bits and IEEE float of 32 or 64 are read; dr_wav's compressed variants
// (ADPCM, A-law, µ-law) and odd bit depths are refused by name.
const f32 = Math.fround;
const U8_SCALE = f32(0.00784313725490196078);
const PIECE_FRAMES = 1 << 16;

const PCM = 0x0001, IEEE_FLOAT = 0x0003, EXTENSIBLE = 0xfffe;
const TAG_NAMES = { 0x0002: 'MS ADPCM', 0x0006: 'A-law', 0x0007: 'µ-law', 0x0011: 'IMA ADPCM', 0x0055: 'MPEG layer 3' };

/**
 * The header of a WAV file: { formatTag, channels, sampleRate, bitsPerSample, frames,
 * dataOffset } (frames: what the data chunk's declared size holds); throws fail(message) when it
 * is not a WAV file this reads or its chunks run past the end.
 * @example const { channels, sampleRate, frames } = readWavHeader(bytes, (m) => new Error(m));
 */
export function readWavHeader(bytes, fail) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let fmt = null;
  for (let at = 12; ;) {
    if (at + 8 > bytes.length) {
      throw fail(fmt ? 'the WAV file has no data chunk (truncated?)' : 'the WAV file has no fmt chunk (truncated?)');
    }
    const id = String.fromCharCode(...bytes.subarray(at, at + 4));
    const size = view.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + size > bytes.length) throw fail(`the WAV file's fmt chunk is ${size} bytes, ${bytes.length - body} are there`);
      fmt = readFormat(view, body, size, fail);
    } else if (id === 'data') {
      if (!fmt) throw fail('the WAV file has its data chunk before its fmt chunk');
      const frameBytes = fmt.channels * fmt.bitsPerSample / 8;
      if (body + size > bytes.length) {
        throw fail(`the WAV file is truncated: its data chunk says ${size} bytes, ${bytes.length - body} are there`);
      }
      return { ...fmt, frames: Math.floor(size / frameBytes), dataOffset: body };
    }
    at = body + size + (size & 1);  // chunks are padded to an even size
  }
}

function readFormat(view, at, size, fail) {
  let formatTag = view.getUint16(at, true);
  const channels = view.getUint16(at + 2, true);
  const sampleRate = view.getUint32(at + 4, true);
  const blockAlign = view.getUint16(at + 12, true);
  const bitsPerSample = view.getUint16(at + 14, true);
  if (formatTag === EXTENSIBLE) {
    if (size < 40) throw fail(`the WAV file's extensible fmt chunk is ${size} bytes, not 40`);
    formatTag = view.getUint16(at + 24, true);  // the sub-format GUID's first two bytes
  }
  const kind = formatTag === PCM ? 'PCM' : formatTag === IEEE_FLOAT ? 'float' : null;
  if (!kind) {
    const name = TAG_NAMES[formatTag] ?? `format tag 0x${formatTag.toString(16).padStart(4, '0')}`;
    throw fail(`WAV ${name} is not supported: PCM (8, 16, 24, 32 bits) and IEEE float (32, 64 bits) are`);
  }
  const depths = kind === 'PCM' ? [8, 16, 24, 32] : [32, 64];
  if (!depths.includes(bitsPerSample)) throw fail(`WAV ${kind} of ${bitsPerSample} bits per sample is not supported: ${depths.join(', ')} are`);
  if (channels === 0) throw fail('the WAV file says it has 0 channels');
  if (blockAlign !== channels * bitsPerSample / 8) {
    throw fail(`the WAV file's block align is ${blockAlign} bytes, ${channels} channels of ${bitsPerSample} bits take ${channels * bitsPerSample / 8}`);
  }
  return { formatTag, channels, sampleRate, bitsPerSample };
}

/**
 * header (readWavHeader's) -> onPiece(channels: Float32Array [piece] per channel, dr_wav's f32)
 * for each piece of up to PIECE_FRAMES frames, in order: what is held at once stays small
 * beside the file.
 * @example readWavSamples(bytes, header, (channels) => mixer.push(channels));
 */
export function readWavSamples(bytes, { formatTag, channels, bitsPerSample, frames, dataOffset }, onPiece) {
  const view = new DataView(bytes.buffer, bytes.byteOffset + dataOffset, frames * channels * bitsPerSample / 8);
  const sample = sampleReader(view, formatTag, bitsPerSample);
  for (let start = 0; start < frames; start += PIECE_FRAMES) {
    const n = Math.min(PIECE_FRAMES, frames - start);
    const piece = Array.from({ length: channels }, () => new Float32Array(n));
    for (let i = 0, k = start * channels; i < n; i++) {
      for (let c = 0; c < channels; c++, k++) piece[c][i] = sample(k);
    }
    onPiece(piece);
  }
}

// The k-th sample of the data chunk as dr_wav's f32.
function sampleReader(view, formatTag, bits) {
  if (formatTag === IEEE_FLOAT) return bits === 32 ? (k) => view.getFloat32(4 * k, true) : (k) => f32(view.getFloat64(8 * k, true));
  if (bits === 8) return (k) => f32(f32(view.getUint8(k) * U8_SCALE) - 1);
  if (bits === 16) return (k) => view.getInt16(2 * k, true) / 32768;
  if (bits === 24) return (k) => f32(((view.getUint8(3 * k) << 8 | view.getUint16(3 * k + 1, true) << 16) >> 8) * 0.00000011920928955078125);
  return (k) => f32(view.getInt32(4 * k, true) / 2147483648);
}
