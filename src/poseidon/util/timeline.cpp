// Timeline: recording under one mutex, and the Chrome-trace JSON writer.
#include "poseidon/util/timeline.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <utility>

#include "poseidon/util/io.hpp"
#include "poseidon/util/status.hpp"
#include "utf8.hpp"

namespace poseidon {
namespace {

// Merge() relies on this layout of Write()'s output: the header on a line of
// its own, one event per line, and the footer starting on a new line. JSON
// strings never hold a raw newline, so kFooter's first match ends the array.
constexpr char kHeader[] = "{\"traceEvents\":[\n";
constexpr char kFooter[] = "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{";
constexpr char kDroppedKey[] = "\"dropped_events\":";

void AppendInt(int64_t v, std::string* out) {
  char buf[24];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, result.ptr);
}

// Appends `s` as a JSON string literal. Quotes, backslashes and control
// characters are escaped; bytes that are not valid UTF-8 become U+FFFD.
void AppendJsonString(const std::string& s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(s, i);
      if (len == 0) {
        out->append("\xEF\xBF\xBD");
        ++i;
      } else {
        out->append(s, i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

// {"name":NAME,"ph":"M","pid":P,"tid":T,"args":{KEY:
void AppendMetadataStart(const char* name, int pid, int tid, const char* key,
                         std::string* out) {
  out->append("{\"name\":\"").append(name).append("\",\"ph\":\"M\",\"pid\":");
  AppendInt(pid, out);
  out->append(",\"tid\":");
  AppendInt(tid, out);
  out->append(",\"args\":{\"").append(key).append("\":");
}

// The value after kDroppedKey in a footer, 0 if absent.
int64_t DroppedInFooter(const std::string& text, size_t footer) {
  const size_t at = text.find(kDroppedKey, footer);
  if (at == std::string::npos) return 0;
  return std::strtoll(text.c_str() + at + sizeof(kDroppedKey) - 1, nullptr, 10);
}

}  // namespace

Timeline::Timeline(int pid, std::string process_name, TimelineOptions options)
    : pid_(pid),
      process_name_(std::move(process_name)),
      max_events_(options.max_events),
      epoch_(options.epoch.value_or(std::chrono::steady_clock::now())) {}

int Timeline::Lane(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = lane_ids_.find(name);
  if (it != lane_ids_.end()) return it->second;
  lane_names_.push_back(name);
  const int id = static_cast<int>(lane_names_.size());
  lane_ids_.emplace(name, id);
  return id;
}

int64_t Timeline::NowMicros() const {
  return ToMicros(std::chrono::steady_clock::now());
}

int64_t Timeline::ToMicros(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - epoch_)
      .count();
}

void Timeline::Complete(int lane, const std::string& name,
                        const std::string& category, int64_t begin_us,
                        int64_t end_us,
                        std::initializer_list<TimelineArg> args) {
  Record('X', lane, name, category, begin_us,
         std::max<int64_t>(0, end_us - begin_us), args.begin(), args.size());
}

void Timeline::Instant(int lane, const std::string& name,
                       const std::string& category, int64_t at_us,
                       std::initializer_list<TimelineArg> args) {
  Record('i', lane, name, category, at_us, 0, args.begin(), args.size());
}

void Timeline::Record(char phase, int lane, const std::string& name,
                      const std::string& category, int64_t ts, int64_t dur,
                      const TimelineArg* args, size_t num_args) {
  CHECK_LE(num_args, std::numeric_limits<uint8_t>::max())
      << "Timeline: too many args for event '" << name << "'";
  std::lock_guard<std::mutex> lock(mu_);
  CHECK(lane >= 1 && static_cast<size_t>(lane) <= lane_names_.size())
      << "Timeline: lane " << lane << " was not returned by Lane()";
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  CHECK_LE(args_.size() + num_args, std::numeric_limits<uint32_t>::max());
  Event event;
  event.ts = ts;
  event.dur = dur;
  event.name = Intern(name);
  event.category = Intern(category);
  event.first_arg = static_cast<uint32_t>(args_.size());
  event.lane = lane;
  event.num_args = static_cast<uint8_t>(num_args);
  event.phase = phase;
  for (size_t k = 0; k < num_args; ++k) {
    args_.push_back({Intern(args[k].key), args[k].value});
  }
  events_.push_back(event);
}

uint32_t Timeline::Intern(const std::string& s) {
  const auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  const auto inserted = string_ids_.emplace(s, id).first;
  strings_.push_back(&inserted->first);  // map nodes never move
  return id;
}

size_t Timeline::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t Timeline::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::string Timeline::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Sorted by start time; at equal starts the longer (enclosing) slice comes
  // first, so every viewer nests scopes the way they ran.
  std::vector<size_t> order(events_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    const Event& x = events_[a];
    const Event& y = events_[b];
    if (x.ts != y.ts) return x.ts < y.ts;
    return x.dur > y.dur;
  });

  std::string out;
  out.reserve(256 + 128 * (events_.size() + 2 * lane_names_.size()));
  out.append(kHeader);
  AppendMetadataStart("process_name", pid_, 0, "name", &out);
  AppendJsonString(process_name_, &out);
  out.append("}},\n");
  AppendMetadataStart("process_sort_index", pid_, 0, "sort_index", &out);
  AppendInt(pid_, &out);
  out.append("}}");
  if (dropped_ > 0) {
    out.append(",\n");
    AppendMetadataStart("process_labels", pid_, 0, "labels", &out);
    AppendJsonString(
        StrCat("dropped ", dropped_, " events past max_events=", max_events_),
        &out);
    out.append("}}");
  }
  for (size_t k = 0; k < lane_names_.size(); ++k) {
    const int tid = static_cast<int>(k) + 1;
    out.append(",\n");
    AppendMetadataStart("thread_name", pid_, tid, "name", &out);
    AppendJsonString(lane_names_[k], &out);
    out.append("}},\n");
    AppendMetadataStart("thread_sort_index", pid_, tid, "sort_index", &out);
    AppendInt(tid, &out);
    out.append("}}");
  }
  for (const size_t index : order) {
    const Event& e = events_[index];
    out.append(",\n{\"name\":");
    AppendJsonString(*strings_[e.name], &out);
    out.append(",\"cat\":");
    AppendJsonString(*strings_[e.category], &out);
    if (e.phase == 'X') {
      out.append(",\"ph\":\"X\",\"ts\":");
      AppendInt(e.ts, &out);
      out.append(",\"dur\":");
      AppendInt(e.dur, &out);
    } else {
      out.append(",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
      AppendInt(e.ts, &out);
    }
    out.append(",\"pid\":");
    AppendInt(pid_, &out);
    out.append(",\"tid\":");
    AppendInt(e.lane, &out);
    if (e.num_args > 0) {
      out.append(",\"args\":{");
      for (size_t k = 0; k < e.num_args; ++k) {
        const StoredArg& arg = args_[e.first_arg + k];
        if (k > 0) out.push_back(',');
        AppendJsonString(*strings_[arg.key], &out);
        out.push_back(':');
        AppendInt(arg.value, &out);
      }
      out.push_back('}');
    }
    out.push_back('}');
  }
  out.append(kFooter);
  out.append("\"producer\":\"poseidon\",\"pid\":");
  AppendInt(pid_, &out);
  out.append(",\"process_name\":");
  AppendJsonString(process_name_, &out);
  out.append(",\"recorded_events\":");
  AppendInt(static_cast<int64_t>(events_.size()), &out);
  out.append(",").append(kDroppedKey);
  AppendInt(static_cast<int64_t>(dropped_), &out);
  out.append(",\"max_events\":");
  AppendInt(static_cast<int64_t>(max_events_), &out);
  // The zero of the timestamps on the steady clock (CLOCK_MONOTONIC on
  // Linux), so that a trace lines up with counters sampled on the same host.
  out.append(",\"steady_clock_epoch_us\":");
  AppendInt(std::chrono::duration_cast<std::chrono::microseconds>(
                epoch_.time_since_epoch())
                .count(),
            &out);
  out.append("}}\n");
  return out;
}

void Timeline::Write(const std::string& path) const {
  const std::string json = ToJson();
  try {
    WriteFileAtomically(path, json);
  } catch (const IOError& e) {
    POSEIDON_THROW(IOError, "cannot write timeline '", path, "': ", e.what());
  }
}

void Timeline::Merge(const std::vector<std::string>& inputs,
                     const std::string& output) {
  std::string out = kHeader;
  int64_t dropped = 0;
  bool first = true;
  for (const std::string& input : inputs) {
    std::string text;
    try {
      text = ReadFileToString(input);
    } catch (const IOError& e) {
      POSEIDON_THROW(IOError, "cannot merge timeline '", input, "' into '",
                     output, "': ", e.what());
    }
    const size_t header_size = sizeof(kHeader) - 1;
    const size_t footer = text.find(kFooter);
    if (text.compare(0, header_size, kHeader) != 0 ||
        footer == std::string::npos || footer < header_size) {
      POSEIDON_THROW(IOError, "cannot merge timeline '", input, "' into '",
                     output, "': not a trace written by Timeline::Write");
    }
    if (footer > header_size) {
      if (!first) out.append(",\n");
      out.append(text, header_size, footer - header_size);
      first = false;
    }
    dropped += DroppedInFooter(text, footer);
  }
  out.append(kFooter);
  out.append("\"producer\":\"poseidon\",\"merged_inputs\":");
  AppendInt(static_cast<int64_t>(inputs.size()), &out);
  out.append(",").append(kDroppedKey);
  AppendInt(dropped, &out);
  out.append("}}\n");
  try {
    WriteFileAtomically(output, out);
  } catch (const IOError& e) {
    POSEIDON_THROW(IOError, "cannot write merged timeline '", output,
                   "': ", e.what());
  }
}

TimelineScope::TimelineScope(Timeline* timeline, int lane,
                             const std::string& name, const char* category)
    : timeline_(timeline), lane_(lane), category_(category) {
  if (timeline_ != nullptr) {
    name_ = name;
    begin_us_ = timeline_->NowMicros();
  }
}

TimelineScope::~TimelineScope() {
  if (timeline_ == nullptr) return;
  const int64_t end_us = timeline_->NowMicros();
  timeline_->Record('X', lane_, name_, category_, begin_us_,
                    std::max<int64_t>(0, end_us - begin_us_), args_, num_args_);
}

void TimelineScope::AddArg(const char* key, int64_t value) {
  if (timeline_ == nullptr || num_args_ == kMaxArgs) return;
  args_[num_args_++] = {key, value};
}

std::string TimelinePathForRank(const std::string& path, int rank,
                                int world_size) {
  if (world_size <= 1) return path;
  CHECK(rank >= 0 && rank < world_size)
      << "rank " << rank << " outside a world of " << world_size;
  const std::string suffix = StrCat(".rank", rank);
  const size_t slash = path.find_last_of('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find_last_of('.');
  // No dot in the file name, or only a leading one (".trace"): no extension.
  if (dot == std::string::npos || dot <= name_start) return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

}  // namespace poseidon
