// Mono f32 samples from one rate to another as miniaudio's linear resampler converts them (the
// ma_decoder default that llama.cpp's mtmd-helper uses: ma_resample_algorithm_linear, low-pass
// order 4, Nyquist factor 1), step for step and rounded to f32 where miniaudio's floats round,
// so the model sees the samples llama.cpp's does. No resampling library reproduces this one's
// output (a one-frame delay, the low-pass filter before the interpolation when the rate falls and
// after it when the rate rises, biquads in f32), and the difference would reach the encoder, so it
// is written out here.
const f32 = Math.fround;

/**
 * samples [n] at rateIn -> Float32Array [miniaudio's expected output length] at rateOut; the
 * output miniaudio's decoder would not produce (its length formula may count a frame the
 * resampler never reaches) stays 0, as mtmd's buffer does.
 * @example const at16k = resampleLinear(samples, 44100, 16000);
 */
export function resampleLinear(samples, rateIn, rateOut) {
  const out = new Float32Array(outputLength(samples.length, rateIn, rateOut));
  if (rateIn === rateOut) {
    out.set(samples);
    return out;
  }
  const gcd = greatestCommonDivisor(rateIn, rateOut);
  const inRate = rateIn / gcd, outRate = rateOut / gcd;
  const filter = lowPassOrder4(Math.max(inRate, outRate), Math.min(inRate, outRate) * 0.5);
  const advanceInt = Math.floor(inRate / outRate), advanceFrac = inRate % outRate;
  const down = inRate > outRate;
  let x0 = 0, x1 = 0;
  let timeInt = 1, timeFrac = 0;  // one frame is loaded before the first output
  let next = 0;
  for (let k = 0; k < out.length; k++) {
    while (timeInt > 0 && next < samples.length) {
      x0 = x1;
      x1 = down ? filter(samples[next]) : samples[next];
      next += 1;
      timeInt -= 1;
    }
    if (timeInt > 0) break;  // out of input: miniaudio's read ends here too
    const a = f32(timeFrac / outRate);
    const y = f32(x0 + f32(f32(x1 - x0) * a));
    out[k] = down ? y : filter(y);
    timeInt += advanceInt;
    timeFrac += advanceFrac;
    if (timeFrac >= outRate) {
      timeFrac -= outRate;
      timeInt += 1;
    }
  }
  return out;
}

/**
 * The number of frames miniaudio's decoder says a stream of n frames has at rateOut
 * (ma_calculate_frame_count_after_resampling, unreduced rates): mtmd sizes its buffer by it.
 * @example outputLength(44100, 44100, 16000) // 16000
 */
export function outputLength(n, rateIn, rateOut) {
  if (n === 0) return 0;
  if (rateIn === rateOut) return n;
  const N = BigInt(n), rIn = BigInt(rateIn), rOut = BigInt(rateOut);
  let count = (N * rOut) / rIn;
  const fromFrac = (count * (rIn / rOut)) / rOut;
  if (count * (rIn % rOut) + fromFrac <= N) count += 1n;
  return Number(count);
}

function greatestCommonDivisor(a, b) {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

// miniaudio's ma_lpf of order 4 (two ma_lpf2 sections, Butterworth Qs) on one channel, as a
// function of the next sample: coefficients from the RBJ cookbook in double, normalized and
// rounded to f32, run as direct form 2 transposed in f32.
function lowPassOrder4(sampleRate, cutoff) {
  const sections = [0, 1].map((i) => {
    const q = 1 / (2 * Math.cos((1 + 2 * i) * (Math.PI / 8)));
    const w = 2 * Math.PI * cutoff / sampleRate;
    const s = Math.sin(w), c = Math.cos(w), alpha = s / (2 * q);
    const a0 = 1 + alpha;
    return {
      b0: f32((1 - c) / 2 / a0), b1: f32((1 - c) / a0), b2: f32((1 - c) / 2 / a0),
      a1: f32(-2 * c / a0), a2: f32((1 - alpha) / a0), r1: 0, r2: 0,
    };
  });
  return (x) => {
    for (const bq of sections) {
      const y = f32(f32(bq.b0 * x) + bq.r1);
      bq.r1 = f32(f32(f32(bq.b1 * x) - f32(bq.a1 * y)) + bq.r2);
      bq.r2 = f32(f32(bq.b2 * x) - f32(bq.a2 * y));
      x = y;
    }
    return x;
  };
}
