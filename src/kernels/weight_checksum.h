// The halfword sum the read probe (model/read_probe.h) takes of every byte it reads: the scalar
// definition and the 128-bit loop the probe runs.
#pragma once

#include <cstdint>

namespace lf {

// Sum of the little-endian 16-bit halfwords of p [n] modulo 2^16 (an odd last byte is one
// halfword, zero-padded). The probe sums what it reads so that the reads cannot be optimised
// away, and so that a test can tell that every byte was read. Addition is exact in any order:
// any split of the bytes between workers gives the same sum, and so does any layout that moves
// whole halfwords (unit-major, row strips), so the sum is the file's whatever the layout. 16-bit
// lanes make it one add per vector with no constant: the probe stays bound by memory, not by
// the adds.
uint32_t weight_checksum(const uint8_t* p, uint64_t n);

// p [n] (n a multiple of 16) -> the same halfwords summed with 128-bit loads, two cache lines
// per step; equal to weight_checksum(p, n) modulo 2^16, the reduction left to the caller.
uint32_t weight_checksum_vectors(const uint8_t* p, uint64_t n);

}  // namespace lf
