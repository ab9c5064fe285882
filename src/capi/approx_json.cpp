#include "capi/approx_json.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace lf::capi {
namespace {

// The keys of lf_session_set_approx's JSON (docs/approximate.md).
constexpr const char* kApproxKeys =
    "truncated_attention, truncation_threshold, early_exit, exit_threshold, exit_window, ffn_top_k, "
    "ffn_top_k_layers, ffn_top_k_threshold";

Status bad_approx_value(const std::string& key, const char* expected, const nlohmann::json& value) {
  return Status(Code::invalid_argument, "approximate options: " + key + " must be " + expected + ", got " + value.dump());
}

// value -> *out when it is a number in [lo, hi].
bool number_in(const nlohmann::json& value, double lo, double hi, double* out) {
  if (!value.is_number()) return false;
  *out = value.get<double>();
  return *out >= lo && *out <= hi;
}

}  // namespace

Status parse_approx_options(const char* text, ApproxOptions* options) {
  if (text == nullptr) return Status(Code::invalid_argument, "approximate options: no JSON given");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status(Code::invalid_argument, "approximate options are not valid JSON: " + std::string(text));
  if (!j.is_object()) return Status(Code::invalid_argument, "approximate options must be a JSON object, got: " + j.dump());
  ApproxOptions o;
  for (const auto& [key, value] : j.items()) {
    double x = 0;
    if (key == "truncated_attention" || key == "early_exit") {
      if (!value.is_boolean()) return bad_approx_value(key, "true or false", value);
      (key == "early_exit" ? o.early_exit : o.truncated_attention) = value.get<bool>();
    } else if (key == "truncation_threshold" || key == "ffn_top_k_threshold") {
      if (!number_in(value, 0.0, 1.0, &x)) return bad_approx_value(key, "a number in [0, 1]", value);
      (key == "truncation_threshold" ? o.truncation_threshold : o.ffn_top_k_threshold) = static_cast<float>(x);
    } else if (key == "exit_threshold") {
      if (!number_in(value, 0.0, FLT_MAX, &x)) return bad_approx_value(key, "a number >= 0", value);
      o.exit_threshold = static_cast<float>(x);
    } else if (key == "exit_window") {
      if (!value.is_number_integer() || !number_in(value, 1, kMaxExitWindow, &x)) {
        return bad_approx_value(key, ("an integer in [1, " + std::to_string(kMaxExitWindow) + "]").c_str(), value);
      }
      o.exit_window = static_cast<int>(x);
    } else if (key == "ffn_top_k") {
      if (!number_in(value, 0.0, 1e9, &x)) return bad_approx_value(key, "a number >= 0 (a fraction up to 1, a count above)", value);
      o.ffn_top_k = static_cast<float>(x);
    } else if (key == "ffn_top_k_layers") {
      if (!value.is_object()) return bad_approx_value(key, "an object of layer index to K", value);
      for (const auto& [layer, k] : value.items()) {
        char* end = nullptr;
        const long il = std::strtol(layer.c_str(), &end, 10);
        if (layer.empty() || *end != '\0' || il < 0 || il > INT_MAX) return bad_approx_value(key, "keyed by layer indexes", value);
        if (!number_in(k, 0.0, 1e9, &x)) return bad_approx_value(key + "." + layer, "a number >= 0", k);
        o.ffn_top_k_layers[static_cast<int>(il)] = static_cast<float>(x);
      }
    } else {
      return Status(Code::invalid_argument, "approximate options: unknown key \"" + key + "\" (known: " + kApproxKeys + ")");
    }
  }
  *options = o;
  return Status();
}

Status parse_exit_state(const char* text, ExitState* state) {
  if (text == nullptr) return Status(Code::invalid_argument, "exit state: no JSON given");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(Code::invalid_argument, "exit state must be a JSON object, got: " + std::string(text));
  }
  ExitState e;
  double x = 0;
  for (const auto& [key, value] : j.items()) {
    if (key == "exit_layer") {
      if (!value.is_number_integer() || !number_in(value, -1, INT_MAX, &x)) {
        return Status(Code::invalid_argument, "exit state: exit_layer must be an integer >= -1, got " + value.dump());
      }
      e.exit_layer = static_cast<int>(x);
    } else if (key == "recent_updates") {
      if (!value.is_array() || value.size() > static_cast<size_t>(kMaxExitWindow)) {
        return Status(Code::invalid_argument, "exit state: recent_updates must be an array of at most " +
                                                  std::to_string(kMaxExitWindow) + " numbers, got " + value.dump());
      }
      for (const nlohmann::json& r : value) {
        if (!number_in(r, 0.0, FLT_MAX, &x)) {
          return Status(Code::invalid_argument, "exit state: recent_updates must hold numbers >= 0, got " + r.dump());
        }
        e.recent_updates.push_back(static_cast<float>(x));
      }
    } else {
      return Status(Code::invalid_argument, "exit state: unknown key \"" + key + "\" (known: exit_layer, recent_updates)");
    }
  }
  *state = std::move(e);
  return Status();
}

std::string approx_stats_json(const ForwardReport& last) {
  const ApproxStats s = last.approx_stats();
  nlohmann::ordered_json t;
  t["rows"] = s.attention_rows;
  t["truncated_rows"] = s.truncated_rows;
  t["fallback_rows"] = s.fallback_rows;
  t["v_keys_total"] = s.v_keys_total;
  t["v_keys_kept"] = s.v_keys_kept;
  t["v_work_skipped"] = s.v_work_skipped();
  t["max_dropped_mass"] = s.max_dropped_mass;
  t["max_error_bound"] = s.max_error_bound;
  nlohmann::ordered_json f;
  f["rows"] = s.ffn_rows;
  f["fallback_rows"] = s.ffn_fallback_rows;
  f["features_total"] = s.ffn_features_total;
  f["features_kept"] = s.ffn_features_kept;
  f["features_skipped"] = s.ffn_features_skipped();
  f["max_dropped_gate_mass"] = s.max_dropped_gate_mass;
  nlohmann::ordered_json e;
  e["exit_layer"] = last.exit_out.exit_layer;
  e["recent_updates"] = last.exit_out.recent_updates;
  e["row_updates"] = last.row_updates;
  e["layers_skipped"] = std::count(last.row_updates.begin(), last.row_updates.end(), -1.0f);
  nlohmann::ordered_json out;
  out["truncated_attention"] = t;
  out["ffn_top_k"] = f;
  out["early_exit"] = e;
  return out.dump();
}

}  // namespace lf::capi
