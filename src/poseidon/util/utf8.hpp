// UTF-8 validation shared by the escaping of quoted input (status.cpp) and
// the timeline's JSON strings (timeline.cpp).
#ifndef POSEIDON_UTIL_UTF8_HPP_
#define POSEIDON_UTIL_UTF8_HPP_

#include <cstddef>
#include <string>

namespace poseidon {

// Length of the valid UTF-8 sequence starting at text[i] (2 to 4), or 0 when
// the bytes there are not one (stray continuation, overlong form, surrogate,
// beyond U+10FFFF, truncated).
size_t Utf8SequenceLength(const std::string& text, size_t i);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_UTF8_HPP_
