// The read probe (src/model/read_probe.h), the ceiling scripts/bench measures decode
// against: it must read every byte of the node's layer tensors exactly once, whatever the thread
// count, and no other bytes.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/engine_setup.h"
#include "kernels/weight_checksum.h"
#include "model/read_probe.h"

namespace {

using lf::test::FixtureModel;

// The tensors of layers [begin, end) as the file lists them: their bytes and scalar checksum
struct Expected {
  uint64_t bytes = 0;
  uint32_t checksum = 0;
};

Expected layer_tensors_in_file(const FixtureModel& f, int begin, int end) {
  Expected e;
  const uint8_t* base = f.bytes.data() + f.file.data_offset;
  for (const lf::GgufTensorInfo& t : f.file.tensors) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    const int layer = std::stoi(t.name.substr(4));
    if (layer < begin || layer >= end) continue;
    e.bytes += t.n_bytes;
    e.checksum += lf::weight_checksum(base + t.offset, t.n_bytes);
  }
  e.checksum &= 0xFFFFu;
  return e;
}

}  // namespace

TEST_CASE("weight_checksum adds little-endian halfwords modulo 2^16 and zero-pads the tail", "[read_probe]") {
  const uint8_t bytes[7] = {0x01, 0x02, 0x03, 0x04, 0xFF, 0xFF, 0x81};
  CHECK(lf::weight_checksum(bytes, 4) == 0x0201u + 0x0403u);
  CHECK(lf::weight_checksum(bytes, 6) == 0x0201u + 0x0403u - 1u);           // + 0xFFFF wraps to - 1
  CHECK(lf::weight_checksum(bytes, 7) == 0x0201u + 0x0403u - 1u + 0x0081u);  // the odd byte, high half 0
  CHECK(lf::weight_checksum(bytes, 0) == 0u);
}

TEST_CASE("weight_checksum_vectors sums as weight_checksum over lengths around its 128-byte step", "[read_probe]") {
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(1 + 16 * 40);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  bytes[1] = bytes[2] = 0xFF;  // a halfword that wraps the lanes
  for (const uint64_t n : {0, 16, 112, 128, 144, 240, 256, 272, 16 * 40}) {
    for (const uint64_t start : {0, 1}) {  // loads from any address
      if (start + n > bytes.size()) continue;
      const uint8_t* p = bytes.data() + start;
      INFO("n " << n << " start " << start);
      CHECK((lf::weight_checksum_vectors(p, n) & 0xFFFFu) == lf::weight_checksum(p, n));
    }
  }
}

TEST_CASE("the read probe reads every byte of the node's layers once, for any thread count", "[read_probe]") {
  const FixtureModel f = lf::test::fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  for (const lf::LayerRange range : {lf::LayerRange{0, lf::test::kFixtureLayers}, lf::LayerRange{1, 2}}) {
    const Expected expected = layer_tensors_in_file(f, range.begin, range.end);
    REQUIRE(expected.bytes > 0);
    for (const int n_threads : {1, 2, 3, 8}) {
      INFO("layers [" << range.begin << ", " << range.end << "), threads " << n_threads);
      const lf::Model m = lf::test::load(f, {range, n_threads});
      lf::ReadProbe probe;
      REQUIRE(lf::read_probe(m, &probe).ok());
      CHECK(probe.bytes == expected.bytes);
      CHECK(probe.checksum == expected.checksum);
      CHECK(probe.ms >= 0);
    }
  }
}

TEST_CASE("the read probe refuses to start while the model's threads run a job, and runs after it", "[read_probe]") {
  const FixtureModel f = lf::test::fixture(lf::Arch::gemma4);
  const lf::Model m = lf::test::load(f, {{0, -1}, 2});
  std::atomic<bool> release{false}, finished{false};
  REQUIRE(m.pool->start([&](int) { while (!release.load()) std::this_thread::yield(); }, [&] { finished = true; }));
  bool probe_ran = false;
  const lf::Status refused = lf::read_probe_async(m, [&](const lf::ReadProbe&) { probe_ran = true; });
  CHECK(refused.code() == lf::Code::failed_precondition);
  CHECK(refused.message().find("busy") != std::string::npos);
  release = true;
  while (!finished.load()) std::this_thread::yield();
  CHECK_FALSE(probe_ran);
  lf::ReadProbe probe;
  REQUIRE(lf::read_probe(m, &probe).ok());
  CHECK(probe.bytes == layer_tensors_in_file(f, 0, lf::test::kFixtureLayers).bytes);
}
