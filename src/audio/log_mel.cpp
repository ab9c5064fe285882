#include "audio/log_mel.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "audio/audio_config.h"
#include "ops/ops.h"

namespace lf {
namespace {

constexpr double kPi = 3.14159265358979323846;

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

}  // namespace

LogMel::LogMel(const AudioConfig& c) : c_(c), sin_(c.n_fft), cos_(c.n_fft), hann_(c.n_fft, 0.0f) {
  const int n_mel = c.n_mel, bins = c.n_fft / 2 + 1;
  // mtmd rounds each angle to f32 before its sinf/cosf; sin_f32/cos_f32 are glibc's, in every build.
  for (int i = 0; i < c.n_fft; ++i) {
    const auto theta = static_cast<float>((2 * kPi * i) / c.n_fft);
    sin_[i] = sin_f32(theta);
    cos_[i] = cos_f32(theta);
  }
  for (int i = 0; i < c.frame_len; ++i) {
    hann_[i] = 0.5f - 0.5f * cos_f32((2.0f * static_cast<float>(kPi) * static_cast<float>(i)) / static_cast<float>(c.frame_len));
  }
  // Triangles between n_mel + 2 points even on the HTK mel scale from 0 Hz to Nyquist, in double.
  const double m_lo = hz_to_mel(0.0), m_hi = hz_to_mel(c.sample_rate / 2.0);
  std::vector<double> hz(static_cast<size_t>(n_mel) + 2);
  for (int i = 0; i < n_mel + 2; ++i) hz[i] = mel_to_hz(m_lo + (m_hi - m_lo) * (static_cast<double>(i) / (n_mel + 1)));
  const double bin_hz = static_cast<double>(c.sample_rate) / c.n_fft;
  filters_.assign(static_cast<size_t>(n_mel) * bins, 0.0f);
  for (int m = 0; m < n_mel; ++m) {
    const double left = hz[m], center = hz[m + 1], right = hz[m + 2];
    const double rise = std::max(1e-30, center - left), fall = std::max(1e-30, right - center);
    for (int k = 0; k < bins; ++k) {
      const double f = k * bin_hz;
      double w = 0.0;
      if (f >= left && f <= center) {
        w = (f - left) / rise;
      } else if (f > center && f <= right) {
        w = (right - f) / fall;
      }
      filters_[static_cast<size_t>(m) * bins + k] = static_cast<float>(w);
    }
  }
}

Status LogMel::chunks(int64_t n_samples, std::vector<int64_t>* starts, std::vector<int64_t>* lengths) const {
  if (n_samples <= 0) return Status(Code::invalid_argument, "the audio clip has no samples");
  const int64_t chunk = static_cast<int64_t>(c_.chunk_seconds) * c_.sample_rate;
  starts->clear();
  lengths->clear();
  for (int64_t at = 0; at < n_samples; at += chunk) {
    const int64_t n = std::min(chunk, n_samples - at);
    if (c_.frames(n) < 1) {
      return Status(Code::invalid_argument, "the audio clip's " + std::string(at == 0 ? "" : "last 30 s piece, ") +
                                                std::to_string(n) + " samples, is too short for one 20 ms frame (llama.cpp refuses it too)");
    }
    starts->push_back(at);
    lengths->push_back(n);
  }
  return Status();
}

std::vector<float> LogMel::padded_chunk(const float* samples, int64_t n) const {
  const int64_t left = c_.frame_len / 2;
  const int64_t needed = static_cast<int64_t>(c_.frames(n) - 1) * c_.hop + c_.n_fft;
  std::vector<float> padded(static_cast<size_t>(std::max(needed - n, left) + n), 0.0f);
  std::copy(samples, samples + n, padded.begin() + left);
  return padded;
}

// Radix-2 decimation in time on real input, mtmd's arithmetic step for step: in [n] (its upper
// part scratch), out [2n] complex with [4n] more below scratch for the halves.
void LogMel::fft(float* in, int n, float* out) const {
  if (n == 1) {
    out[0] = in[0];
    out[1] = 0.0f;
    return;
  }
  const int half = n / 2;
  float* part = in + n;
  float* even = out + 2 * n;
  float* odd = even + n;
  for (int i = 0; i < half; ++i) part[i] = in[2 * i];
  fft(part, half, even);
  for (int i = 0; i < half; ++i) part[i] = in[2 * i + 1];
  fft(part, half, odd);
  const int step = c_.n_fft / n;
  for (int k = 0; k < half; ++k) {
    const float re = cos_[k * step], im = -sin_[k * step];
    const float ore = odd[2 * k], oim = odd[2 * k + 1];
    out[2 * k] = even[2 * k] + re * ore - im * oim;
    out[2 * k + 1] = even[2 * k + 1] + re * oim + im * ore;
    out[2 * (k + half)] = even[2 * k] - re * ore + im * oim;
    out[2 * (k + half) + 1] = even[2 * k + 1] - re * oim - im * ore;
  }
}

void LogMel::frames(const std::vector<float>& padded, int f0, int f1, MelChunk* out, std::vector<float>* scratch) const {
  const int N = c_.n_fft, bins = N / 2 + 1;
  scratch->resize(2 * N + 8 * N);
  float* in = scratch->data();
  float* spectrum = in + 2 * N;
  const auto n_padded = static_cast<int64_t>(padded.size());
  for (int i = f0; i < f1; ++i) {
    const int64_t offset = static_cast<int64_t>(i) * c_.hop;
    const int valid = static_cast<int>(std::min<int64_t>(N, std::max<int64_t>(0, n_padded - offset)));
    for (int j = 0; j < valid; ++j) in[j] = hann_[j] * padded[offset + j];
    std::fill(in + valid, in + 2 * N, 0.0f);
    fft(in, N, spectrum);
    for (int j = 0; j < bins; ++j) {
      const float power = spectrum[2 * j] * spectrum[2 * j] + spectrum[2 * j + 1] * spectrum[2 * j + 1];
      spectrum[j] = std::sqrt(power);
    }
    for (int m = 0; m < c_.n_mel; ++m) {
      const float* w = &filters_[static_cast<size_t>(m) * bins];
      // Four products summed in f32, each four added to a double sum (mtmd's unrolled loop).
      double sum = 0.0;
      int k = 0;
      for (; k < bins - 3; k += 4) {
        sum += spectrum[k] * w[k] + spectrum[k + 1] * w[k + 1] + spectrum[k + 2] * w[k + 2] + spectrum[k + 3] * w[k + 3];
      }
      for (; k < bins; ++k) sum += spectrum[k] * w[k];
      sum = std::max(sum, static_cast<double>(c_.mel_floor));
      out->data[static_cast<size_t>(m) * out->n_frames + i] = static_cast<float>(std::log(sum));
    }
  }
}

}  // namespace lf
