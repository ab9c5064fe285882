#include "model/member_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/forward_checks.h"
#include "model/kv_shipping.h"
#include "model/layer.h"
#include "model/moe_steps.h"
#include "model/run_layers.h"
#include "model/scratch.h"
#include "quant/finite_check.h"
#include "quant/quant.h"

namespace lf {

struct MemberForward::State {
  State(const Member& m, Session& session, int pos, int rows, const ScratchShape& sizes)
      : member(m), s(session), start_pos(pos), n(rows), shape(sizes), b(shape, m.model.pool->size()) {}

  const Member& member;
  Session& s;
  int start_pos, n;
  ScratchShape shape;
  Scratch b;
  BatchRows rows;
  KvUndo undo;
  // The gathered vectors that have no place in Scratch, at their whole widths.
  std::vector<float> attn_full;     // [n, q_dim] the attention output
  std::vector<float> act_full;      // [n, n_ff] gelu(gate) · up
  std::vector<float> exp_act_full;  // [n · n_used, n_ff_exp] the experts' activations
  // This member's rows of the closing projections.
  std::vector<float> proj_piece;    // [n, its n_embd rows] W_o or W_down
  std::vector<float> exp_piece;     // [n, its n_embd rows] the experts' weighted sum

  const Model& model() const { return member.model; }
};

namespace {

using State = MemberForward::State;

// One piece's part: rows × the member's columns `cols` of a vector `width` wide at dst.
struct Part {
  int64_t rows = 0;
  RowRange cols;
  int64_t width = 0;
  float* dst = nullptr;
};

// Where the gathered vectors are (all null where only the parts' sizes are wanted).
struct Gathered {
  float* attn_full = nullptr;
  float* proj = nullptr;
  float* act_full = nullptr;
  float* exp_act_full = nullptr;
  float* moe_out = nullptr;
};

// Member `member`'s parts of layer il's vector at `phase`, in a call of n rows.
std::vector<Part> parts(const ModelConfig& full, const MemberSplit& split, int n, int il, MemberPhase phase, int member,
                        const Gathered& to) {
  const MemberLayerSlice& s = split.slice(member, il);
  const LayerConfig& l = full.layers[il];
  const int64_t E = full.n_embd, slots = static_cast<int64_t>(n) * full.n_expert_used;
  switch (phase) {
    case MemberPhase::attention: {
      const int64_t cols = static_cast<int64_t>(l.n_head / l.n_head_kv) * l.head_dim;
      return {{n, {s.kv_heads.begin * cols, s.kv_heads.end * cols}, l.q_dim(), to.attn_full}};
    }
    case MemberPhase::attn_output:
      return {{n, s.embd, E, to.proj}};
    case MemberPhase::ffn:
      if (!l.moe) return {{n, s.ff, l.n_ff, to.act_full}};
      return {{n, s.ff, l.n_ff, to.act_full}, {slots, s.ff_exp, full.n_ff_exp, to.exp_act_full}};
    case MemberPhase::ffn_down:
      if (!l.moe) return {{n, s.embd, E, to.proj}};
      return {{n, s.embd, E, to.proj}, {n, s.embd, E, to.moe_out}};
  }
  return {};
}

std::vector<Part> parts(State& st, int il, MemberPhase phase, int member) {
  const Gathered to{st.attn_full.data(), st.b.proj.data(), st.act_full.data(), st.exp_act_full.data(), st.b.moe.out.data()};
  return parts(st.member.full, st.member.split, st.n, il, phase, member, to);
}

size_t part_floats(const std::vector<Part>& ps) {
  size_t floats = 0;
  for (const Part& p : ps) floats += static_cast<size_t>(p.rows * p.cols.size());
  return floats;
}

// Where this member's own values of each part are, rows of the part's column count.
std::vector<const float*> own_values(const State& st, int il, MemberPhase phase) {
  switch (phase) {
    case MemberPhase::attention: return {st.b.attn_out.data()};
    case MemberPhase::attn_output: return {st.proj_piece.data()};
    case MemberPhase::ffn: return {st.b.act.data(), st.b.moe.act.data()};
    case MemberPhase::ffn_down: return {st.proj_piece.data(), st.exp_piece.data()};
  }
  (void)il;
  return {};
}

// The phases' work on one worker of the member's pool (model/layer.h's steps on the member's
// slices and on the gathered vectors).
void attention(const LayerCall& c) {
  attention_input(c);
  c.sync();
  attend_units(c);
}

void attn_output(const LayerCall& c, State& st) {
  c.check(convert_rows(c.w().attn_output, st.attn_full.data(), c.my_share(c.n_act()), c.b.xc_o.data()));
  c.sync();
  project_my_rows(c, c.w().attn_output, c.b.xc_o.data(), st.proj_piece.data());
}

void ffn(const LayerCall& c) {
  const Share rows = c.my_share(c.n_act());
  for (int64_t t = rows.begin; t < rows.end; ++t) attention_residual(c, t);
  c.sync();
  geglu_features(c);
  if (!c.l().moe) return;
  route(c);
  c.sync();
  group_slots(c);
  c.sync();
  const LayerWeights& w = c.w();
  const WeightView& gate = c.c().fused_gate_up ? w.ffn_gate_up_exps : w.ffn_gate_exps;
  convert_slots(c, gate, c.b.moe.exp_in, true, &c.b.moe.xc_exp);
  if (!c.c().fused_gate_up && up_needs_own_activations(gate.type, w.ffn_up_exps.type)) {
    convert_slots(c, w.ffn_up_exps, c.b.moe.exp_in, true, &c.b.moe.xc_exp_up);
  }
  c.sync();
  gate_up(c);
}

void ffn_down(const LayerCall& c, State& st) {
  const Share rows = c.my_share(c.n_act());
  c.check(convert_rows(c.w().ffn_down, st.act_full.data(), rows, c.b.xc_down.data()));
  if (c.l().moe) convert_slots(c, c.w().ffn_down_exps, st.exp_act_full, false, &c.b.moe.xc_act);
  c.sync();
  project_my_rows(c, c.w().ffn_down, c.b.xc_down.data(), st.proj_piece.data());
  if (!c.l().moe) return;
  down(c);
  c.sync();
  const int64_t width = c.w().ffn_down.n_out;
  for (int64_t t = rows.begin; t < rows.end; ++t) weigh_experts(c, t, width, st.exp_piece.data() + t * width);
}

// The layer's output from the gathered W_down rows (and experts): its residual, per token.
void finish_layer(const LayerCall& c) {
  const Share rows = c.my_share(c.n_act());
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    if (c.l().moe) {
      norm_experts(c, t);
      moe_residual(c, t);
    } else {
      ffn_residual(c, t);
    }
  }
}

}  // namespace

const char* member_phase_name(MemberPhase phase) {
  static const char* const names[kMemberPhases] = {"attention", "attn_output", "ffn", "ffn_down"};
  return names[static_cast<int>(phase)];
}

uint64_t member_down_exps_row(GgmlType down_exps_type, const ModelConfig& full) {
  return activation_row_bytes(down_exps_type, full.n_ff_exp);
}

MemberCallFloats member_call_floats(const ModelConfig& full, const MemberSplit& split, int member, int n) {
  MemberCallFloats f;
  const size_t rows = static_cast<size_t>(n), E = static_cast<size_t>(full.n_embd);
  for (int il = split.range.begin; il < split.range.end; ++il) {
    const LayerConfig& l = full.layers[il];
    f.attn_full = std::max(f.attn_full, rows * static_cast<size_t>(l.q_dim()));
    f.act_full = std::max(f.act_full, rows * static_cast<size_t>(l.n_ff));
    for (int p = 0; p < kMemberPhases; ++p) {
      f.piece = std::max(f.piece, part_floats(parts(full, split, n, il, static_cast<MemberPhase>(p), member, {})));
    }
  }
  f.exp_act_full = rows * static_cast<size_t>(full.n_expert_used) * static_cast<size_t>(full.n_ff_exp);
  f.proj_piece = f.exp_piece = rows * E;
  return f;
}

Status MemberForward::prepare(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                              std::unique_ptr<MemberForward>* out) {
  const Model& m = member.model;
  if (!m.pool) return Status(Code::failed_precondition, "the member has no threads: load it with load_member");
  if (n <= 0) return Status(Code::invalid_argument, "n must be positive, got " + std::to_string(n));
  const ApproxOptions& approx = session.approx;
  if (approx.truncated_attention || approx.early_exit || approx.top_k_ffn_on()) {
    return Status(Code::unsupported, "a tensor-parallel member runs the exact engine only: no approximate modes");
  }
  if (in.size() != static_cast<size_t>(n) * static_cast<size_t>(m.config.n_embd)) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(static_cast<size_t>(n) * m.config.n_embd));
  }
  LF_RETURN_IF_ERROR(validate_entry(m, BatchEntry{&session, start_pos, n, false}, in));

  ScratchShape shape = scratch_shape(m, n, false);
  for (int il = m.range.begin; il < m.range.end; ++il) {
    const WeightView& down_exps = m.layer(il).ffn_down_exps;
    if (down_exps.present()) shape.moe.down_row = member_down_exps_row(down_exps.type, member.full);
  }
  auto f = std::unique_ptr<MemberForward>(new MemberForward());
  f->state_ = std::make_unique<State>(member, session, start_pos, n, shape);
  State& st = *f->state_;
  const MemberCallFloats floats = member_call_floats(member.full, member.split, member.index, n);
  st.attn_full.resize(floats.attn_full);
  st.act_full.resize(floats.act_full);
  st.exp_act_full.resize(floats.exp_act_full);
  st.proj_piece.resize(floats.proj_piece);
  st.exp_piece.resize(floats.exp_piece);
  f->piece_.reserve(floats.piece);
  st.rows.segments.push_back(Segment{&session, start_pos, n});
  st.rows.lay_out();
  std::copy(in.begin(), in.end(), st.b.x.begin());
  // Mirrored caches take the call's positions first, as a node's (prepare_forward).
  for (const KvRows& rows : session.kv_rows_in) session.kv.store_rows(rows);
  session.kv.save_overwritten(start_pos, n, &st.undo);
  f->layer_ = m.range.begin;
  f->phase_ = MemberPhase::attention;
  *out = std::move(f);
  return Status();
}

Status MemberForward::begin(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                            std::unique_ptr<MemberForward>* out) {
  std::unique_ptr<MemberForward> f;
  LF_RETURN_IF_ERROR(prepare(member, session, start_pos, in, n, &f));
  LF_RETURN_IF_ERROR(f->run_phase());
  *out = std::move(f);
  return Status();
}

Status MemberForward::begin_async(const Member& member, Session& session, int start_pos, std::span<const float> in, int n,
                                  std::function<void()> done, std::unique_ptr<MemberForward>* out) {
  std::unique_ptr<MemberForward> f;
  LF_RETURN_IF_ERROR(prepare(member, session, start_pos, in, n, &f));
  LF_RETURN_IF_ERROR(f->start_phase(std::move(done)));
  *out = std::move(f);
  return Status();
}

MemberForward::~MemberForward() {
  // A phase still on the pool reads this call's buffers: its end comes first (the pool takes an
  // empty job only once it is free). Only a host that skipped end_phase() waits here.
  while (running_ && !state_->model().pool->run([](int) {})) {
  }
  if (state_ && !done_) abandon();
}

void MemberForward::abandon() {
  state_->s.kv.restore(state_->undo);
  done_ = true;
}

size_t MemberForward::piece_floats(int member) const { return part_floats(parts(*state_, layer_, phase_, member)); }

uint64_t MemberForward::buffer_bytes() const {
  const State& st = *state_;
  const size_t floats = st.attn_full.size() + st.act_full.size() + st.exp_act_full.size() + st.proj_piece.size() +
                        st.exp_piece.size() + piece_.capacity();
  return st.shape.bytes(st.model().pool->size()) + sizeof(float) * floats;
}

Status MemberForward::put_piece(int member, std::span<const float> piece) {
  const int n_members = state_->member.split.n_members;
  if (done_) return Status(Code::failed_precondition, "the call is over: no piece is expected");
  if (running_) return Status(Code::failed_precondition, "the phase under way has not ended: end_phase() first");
  if (member < 0 || member >= n_members) {
    return Status(Code::invalid_argument, "member " + std::to_string(member) + " is not one of the group's " +
                                              std::to_string(n_members));
  }
  const std::string which = std::string(member_phase_name(phase_)) + " piece of member " + std::to_string(member) +
                            " in layer " + std::to_string(layer_);
  if (piece.size() != piece_floats(member)) {
    return Status(Code::invalid_argument, "the " + which + " has " + std::to_string(piece.size()) + " floats, expected " +
                                              std::to_string(piece_floats(member)));
  }
  for (size_t i = 0; i < piece.size(); ++i) {
    if (!std::isfinite(piece[i])) return Status(Code::invalid_argument, "the " + which + " holds a non-finite value at " + std::to_string(i));
  }
  const float* src = piece.data();
  for (const Part& p : parts(*state_, layer_, phase_, member)) {
    const int64_t w = p.cols.size();
    for (int64_t r = 0; r < p.rows; ++r, src += w) std::copy(src, src + w, p.dst + r * p.width + p.cols.begin);
  }
  received_[static_cast<size_t>(member)] = true;
  return Status();
}

Status MemberForward::step() {
  LF_RETURN_IF_ERROR(advance());
  return run_phase();
}

Status MemberForward::step_async(std::function<void()> done) {
  LF_RETURN_IF_ERROR(advance());
  return start_phase(std::move(done));
}

Status MemberForward::advance() {
  if (done_) return Status(Code::failed_precondition, "the call is over: there is no next phase");
  if (running_) return Status(Code::failed_precondition, "the phase under way has not ended: end_phase() first");
  for (size_t j = 0; j < received_.size(); ++j) {
    if (!received_[j]) {
      return Status(Code::failed_precondition, std::string("the ") + member_phase_name(phase_) + " piece of member " +
                                                   std::to_string(j) + " in layer " + std::to_string(layer_) + " is missing");
    }
  }
  if (phase_ != MemberPhase::ffn_down) {
    phase_ = static_cast<MemberPhase>(static_cast<int>(phase_) + 1);
  } else {
    ++layer_;
    phase_ = MemberPhase::attention;
  }
  return Status();
}

std::span<const float> MemberForward::output() const {
  if (!done_ || !state_) return {};
  const Model& m = state_->model();
  const std::vector<float>& x = residual(state_->b, m.range.end - m.range.begin);
  return {x.data(), static_cast<size_t>(state_->n) * static_cast<size_t>(m.config.n_embd)};
}

Status MemberForward::run_phase() { return end_job(state_->model().pool->run(phase_job())); }

Status MemberForward::start_phase(std::function<void()> done) {
  if (!state_->model().pool->start(phase_job(), std::move(done))) return end_job(false);
  running_ = true;
  return Status();
}

Status MemberForward::end_phase() {
  if (!running_) return Status(Code::failed_precondition, "no phase was started: nothing to end");
  running_ = false;
  return end_job(true);
}

// The current phase's work on the member's pool: after W_down's gather the finished layer's
// residual first, then (but past the last layer) the phase's own work.
ThreadPool::Job MemberForward::phase_job() {
  const Model& m = state_->model();
  const int first = m.range.begin;
  const bool finishes = phase_ == MemberPhase::attention && layer_ > first;
  const bool last = layer_ == m.range.end;
  const int il = layer_;
  return [this, first, finishes, last, il](int worker) {
    State& st = *state_;
    const Model& m = st.model();
    if (finishes) {
      const int prev = il - 1;
      finish_layer(LayerCall{m, st.b, *m.pool, residual(st.b, prev - first), residual(st.b, prev - first + 1), worker,
                             prev, st.rows});
      if (last) return;
      m.pool->barrier();
    }
    const LayerCall c{m, st.b, *m.pool, residual(st.b, il - first), residual(st.b, il - first + 1), worker, il, st.rows};
    switch (phase_) {
      case MemberPhase::attention: attention(c); break;
      case MemberPhase::attn_output: attn_output(c, st); break;
      case MemberPhase::ffn: ffn(c); break;
      case MemberPhase::ffn_down: ffn_down(c, st); break;
    }
  };
}

// After the phase's work (ran: whether the pool took it): its errors, and this member's piece,
// or past the last layer the call's output checked and the session moved on.
Status MemberForward::end_job(bool ran) {
  State& st = *state_;
  const Model& m = st.model();
  const int first = m.range.begin;
  const bool last = layer_ == m.range.end;
  const int il = layer_;
  if (!ran) {
    abandon();
    return Status(Code::failed_precondition, kPoolBusy);
  }
  for (const Status& e : st.b.errors) {
    if (!e.ok()) {
      abandon();
      return e;
    }
  }
  if (last) {
    const std::vector<float>& x = residual(st.b, m.range.end - first);
    const Status finite = check_norm_input_rows({x.data(), static_cast<size_t>(st.n) * m.config.n_embd}, m.config.n_embd,
                                                "output of the member's layers");
    if (!finite.ok()) {
      abandon();
      return finite;
    }
    st.s.set_n_past(st.start_pos + st.n);
    st.s.per_layer_in.clear();
    st.s.kv_rows_in.clear();
    // This member's heads of the call's rows of the sources whose readers follow the range.
    const std::vector<int> shipped = kv_layers_shipped(m.config, m.range.begin, m.range.end);
    st.s.last.kv_rows_out.resize(shipped.size());
    for (size_t j = 0; j < shipped.size(); ++j) st.s.kv.read_rows(shipped[j], st.start_pos, st.n, &st.s.last.kv_rows_out[j]);
    done_ = true;
    piece_.clear();
    return Status();
  }
  piece_.clear();
  const std::vector<Part> mine = parts(st, il, phase_, st.member.index);
  const std::vector<const float*> values = own_values(st, il, phase_);
  for (size_t k = 0; k < mine.size(); ++k) {
    piece_.insert(piece_.end(), values[k], values[k] + mine[k].rows * mine[k].cols.size());
  }
  received_.assign(static_cast<size_t>(st.member.split.n_members), false);
  return Status();
}

}  // namespace lf
