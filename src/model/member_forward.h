// A forward call of one tensor-parallel member (docs/tensor-parallel.md), run phase by phase so
// that the host can exchange the members' pieces between them, in memory or over a network.
// Each layer has four exchange points; at each, every member produces its piece of a vector
// and, once given all members' pieces, continues from the whole vector:
//   attention    this member's heads' columns of the attention output   [n, its q columns]
//   attn_output  its rows of W_o · attn_out                             [n, its n_embd rows]
//   ffn          its features of gelu(gate) · up                        [n, its n_ff rows]
//                and on a MoE layer its rows of each chosen expert's    [n · n_used, its n_ff_exp rows]
//   ffn_down     its rows of W_down · act                               [n, its n_embd rows]
//                and on a MoE layer its rows of the experts' weighted sum [n, its n_embd rows]
// Norms, residuals and the router run on every member from the whole vectors, identically, so
// the members stay in step and the output is a single node's bytes for any member count.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/member.h"
#include "model/session.h"

namespace lf {

enum class MemberPhase { attention = 0, attn_output = 1, ffn = 2, ffn_down = 3 };
inline constexpr int kMemberPhases = 4;
const char* member_phase_name(MemberPhase phase);  // "attention", "attn_output", "ffn", "ffn_down"

// The buffers a member's call of n rows holds beside its Scratch, in floats: the gathered
// vectors at their whole widths, this member's rows of the closing projections, and its largest
// piece. What the call allocates, so that a host can count a member before loading it.
struct MemberCallFloats {
  size_t attn_full = 0, act_full = 0, exp_act_full = 0, proj_piece = 0, exp_piece = 0, piece = 0;
  size_t total() const { return attn_full + act_full + exp_act_full + proj_piece + exp_piece + piece; }
};
MemberCallFloats member_call_floats(const ModelConfig& full, const MemberSplit& split, int member, int n);
// A member converts the chosen experts' activations for ffn_down_exps whole, at every expert's
// full width (its rows of the matrix have every column): the bytes of one slot's row.
uint64_t member_down_exps_row(GgmlType down_exps_type, const ModelConfig& full);

class MemberForward {
 public:
  // Starts a call of n positions start_pos .. start_pos+n-1: in [n, n_embd] (every member the same
  // rows) through a session of member.model, and runs the first layer's attention. The call is
  // checked as forward() checks it (position, room, input, per-layer inputs); a refused call,
  // like a call abandoned or failed before its end, leaves the session as it was. The session
  // runs the exact engine: approximate modes are refused. Member and session must outlive it.
  static Status begin(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                      std::unique_ptr<MemberForward>* out);
  // begin() and step() with the phase started on the member's pool rather than waited for, so
  // that the host's thread is free meanwhile (to take the other members' pieces as they come):
  // done runs on a worker once the phase's work is over, and end_phase() must then finish it
  // before anything else is asked of the call (freeing it included).
  static Status begin_async(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                            std::function<void()> done, std::unique_ptr<MemberForward>* out);
  Status step_async(std::function<void()> done);
  Status end_phase();
  ~MemberForward();

  int layer() const { return layer_; }
  MemberPhase phase() const { return phase_; }
  bool done() const { return done_; }

  // This member's piece of the current phase, and how many floats member j's piece holds.
  std::span<const float> piece() const { return piece_; }
  size_t piece_floats(int member) const;
  // Member j's piece of the current phase (this member's own too), checked for its size.
  Status put_piece(int member, std::span<const float> piece);
  // Once every member's piece is in: the whole vector's steps and the next phase (or, after the
  // last layer, the end of the call: its output checked and the session moved on).
  Status step();
  // The call's output [n, n_embd], once done().
  std::span<const float> output() const;
  // Bytes of the call's buffers: its Scratch on the member's workers and member_call_floats'.
  uint64_t buffer_bytes() const;

  struct State;

 private:
  MemberForward() = default;
  static Status prepare(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                        std::unique_ptr<MemberForward>* out);
  Status advance();
  Status run_phase();
  Status start_phase(std::function<void()> done);
  ThreadPool::Job phase_job();
  Status end_job(bool ran);
  void abandon();

  std::unique_ptr<State> state_;
  int layer_ = 0;
  MemberPhase phase_ = MemberPhase::attention;
  bool done_ = false;
  bool running_ = false;  // a phase started by begin_async / step_async, not yet ended
  std::vector<float> piece_;
  std::vector<bool> received_;  // [members] this phase's pieces put
};

}  // namespace lf
