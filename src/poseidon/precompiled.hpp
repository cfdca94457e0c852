// The headers nearly every source file of the library and the tests parses,
// compiled once per target (CMake's target_precompile_headers, option
// POSEIDON_PCH): the generated caffe.pb.h alone is about 8,000 lines of
// declarations, and parsing these took more than half of a typical layer's
// compile time. Only headers that change rarely belong here.
#ifndef POSEIDON_PRECOMPILED_HPP_
#define POSEIDON_PRECOMPILED_HPP_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "poseidon/proto/caffe.pb.h"
#include "poseidon/common.hpp"
#include "poseidon/blob.hpp"
#include "poseidon/layer.hpp"

#endif  // POSEIDON_PRECOMPILED_HPP_
