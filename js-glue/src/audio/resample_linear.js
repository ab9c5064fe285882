// Mono f32 samples from one rate to another as miniaudio's linear resampler converts them (the
// ma_decoder default that llama.cpp's mtmd-helper uses: ma_resample_algorithm_linear, low-pass
// order 4, Nyquist factor 1), step for step and rounded to f32 where miniaudio's floats round,
// so the model sees the samples llama.cpp's does. No resampling library reproduces this one's
// output (a one-frame delay, the low-pass filter before the interpolation when the rate falls and
// after it when the rate rises, biquads in f32), and the difference would reach the encoder, so it
// is written out here.
const f32 = Math.fround;

/**
 * A stream of mono samples at rateIn, resampled to rateOut as it comes: push(samples) -> the
 * output frames they complete. The whole stream's output is what miniaudio's decoder reads:
 * the first outputLength(n) of them, zeros past what the resampler produced (its length formula
 * may count a frame the resampler never reaches; mtmd's buffer keeps 0 there).
 * @example const resampler = new LinearResampler(44100, 16000); const out = resampler.push(piece);
 */
export class LinearResampler {
  constructor(rateIn, rateOut) {
    const gcd = greatestCommonDivisor(rateIn, rateOut);
    this.inRate = rateIn / gcd;
    this.outRate = rateOut / gcd;
    this.same = rateIn === rateOut;
    this.down = this.inRate > this.outRate;
    this.filter = lowPassOrder4(Math.max(this.inRate, this.outRate), Math.min(this.inRate, this.outRate) * 0.5);
    this.advanceInt = Math.floor(this.inRate / this.outRate);
    this.advanceFrac = this.inRate % this.outRate;
    this.x0 = 0;
    this.x1 = 0;
    this.timeInt = 1;  // one frame is loaded before the first output
    this.timeFrac = 0;
  }

  push(samples) {
    if (this.same) return Float32Array.from(samples);
    // every output needs one more input frame; at most this many are completed
    const out = new Float32Array(Math.ceil((samples.length + 1) * this.outRate / this.inRate) + 1);
    let n = 0;
    for (let next = 0; ;) {
      while (this.timeInt > 0 && next < samples.length) {
        this.x0 = this.x1;
        this.x1 = this.down ? this.filter(samples[next]) : samples[next];
        next += 1;
        this.timeInt -= 1;
      }
      if (this.timeInt > 0) break;  // out of input until the next push
      const a = f32(this.timeFrac / this.outRate);
      const y = f32(this.x0 + f32(f32(this.x1 - this.x0) * a));
      out[n++] = this.down ? y : this.filter(y);
      this.timeInt += this.advanceInt;
      this.timeFrac += this.advanceFrac;
      if (this.timeFrac >= this.outRate) {
        this.timeFrac -= this.outRate;
        this.timeInt += 1;
      }
    }
    return out.subarray(0, n);
  }
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
