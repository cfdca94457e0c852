// util/timeline: lanes, recording from several threads, the Chrome-trace JSON
// (checked with a small strict JSON parser below), escaping, the event cap,
// atomic writes and their errors, TimelineScope, rank paths and Merge.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/util/io.hpp"
#include "poseidon/util/status.hpp"
#include "poseidon/util/timeline.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// ---- a strict JSON reader, enough to check the writer ----------------------

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = kNull;
  std::string text;  // a string's value, or a number's or literal's spelling
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* Find(const std::string& key) const {
    for (const auto& m : members) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }
  int64_t Int() const { return std::stoll(text); }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  // Parses the whole text as one value; on failure says where in error().
  bool Parse(Json* out) {
    Space();
    if (!Value(out, 0)) return false;
    Space();
    return pos_ == s_.size() || Fail("text after the value");
  }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& what) {
    if (error_.empty()) error_ = StrCat("offset ", pos_, ": ", what);
    return false;
  }
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return Fail("nested too deeply");
    if (pos_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return Number(out);
    for (const char* word : {"true", "false", "null"}) {
      const std::string w = word;
      if (s_.compare(pos_, w.size(), w) == 0) {
        out->kind = w == "null" ? Json::kNull : Json::kBool;
        out->text = w;
        pos_ += w.size();
        return true;
      }
    }
    return Fail(StrCat("unexpected character '", c, "'"));
  }
  bool Object(Json* out, int depth) {
    out->kind = Json::kObject;
    ++pos_;
    Space();
    if (Eat('}')) return true;
    while (true) {
      Space();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a key");
      if (!String(&key)) return false;
      Space();
      if (!Eat(':')) return Fail("expected ':'");
      Space();
      Json value;
      if (!Value(&value, depth + 1)) return false;
      out->members.emplace_back(std::move(key), std::move(value));
      Space();
      if (Eat('}')) return true;
      if (!Eat(',')) return Fail("expected ',' or '}'");
    }
  }
  bool Array(Json* out, int depth) {
    out->kind = Json::kArray;
    ++pos_;
    Space();
    if (Eat(']')) return true;
    while (true) {
      Space();
      Json value;
      if (!Value(&value, depth + 1)) return false;
      out->items.push_back(std::move(value));
      Space();
      if (Eat(']')) return true;
      if (!Eat(',')) return Fail("expected ',' or ']'");
    }
  }
  bool Number(Json* out) {
    const size_t start = pos_;
    Eat('-');
    if (Eat('0')) {
    } else if (!Digits()) {
      return Fail("bad number");
    }
    if (Eat('.') && !Digits()) return Fail("bad fraction");
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return Fail("bad exponent");
    }
    out->kind = Json::kNumber;
    out->text = s_.substr(start, pos_ - start);
    return true;
  }
  bool Digits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }
  bool Hex4(unsigned* value) {
    if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
    *value = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[pos_++];
      unsigned digit;
      if (h >= '0' && h <= '9') {
        digit = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        digit = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        digit = h - 'A' + 10;
      } else {
        return Fail("bad hex digit");
      }
      *value = *value * 16 + digit;
    }
    return true;
  }
  static void AppendUtf8(unsigned cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool String(std::string* out) {
    ++pos_;  // the opening quote
    while (true) {
      if (pos_ >= s_.size()) return Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("raw control character in a string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (pos_ >= s_.size()) return Fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          unsigned cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low;
            if (!Eat('\\') || !Eat('u') || !Hex4(&low) || low < 0xDC00 ||
                low > 0xDFFF) {
              return Fail("unpaired surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail(StrCat("bad escape '\\", e, "'"));
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

// Decodes every code point; rejects overlong forms, surrogates, > U+10FFFF.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    unsigned cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3F);
    }
    const unsigned min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

// Parses `text`; a parse error fails the test and yields a null value.
Json ParseOrFail(const std::string& text) {
  Json doc;
  JsonReader reader(text);
  if (!reader.Parse(&doc)) {
    ADD_FAILURE() << "invalid JSON: " << reader.error();
    return Json();
  }
  EXPECT_TRUE(IsValidUtf8(text)) << "the trace is not valid UTF-8";
  return doc;
}

const Json& Member(const Json& object, const std::string& key) {
  static const Json kMissing;
  const Json* value = object.Find(key);
  EXPECT_NE(value, nullptr) << "missing \"" << key << "\"";
  return value != nullptr ? *value : kMissing;
}

const std::vector<Json>& TraceEvents(const Json& doc) {
  static const std::vector<Json> kNone;
  const Json* events = doc.Find("traceEvents");
  if (events == nullptr || events->kind != Json::kArray) {
    ADD_FAILURE() << "no traceEvents array";
    return kNone;
  }
  return events->items;
}

// Events of phase `ph` ("X", "i", "M").
std::vector<const Json*> EventsWithPhase(const Json& doc,
                                         const std::string& ph) {
  std::vector<const Json*> found;
  for (const Json& e : TraceEvents(doc)) {
    const Json* phase = e.Find("ph");
    if (phase != nullptr && phase->text == ph) found.push_back(&e);
  }
  return found;
}

// Every event carries the fields its phase needs, with the right kinds.
void ExpectWellFormedEvents(const Json& doc) {
  for (const Json& e : TraceEvents(doc)) {
    ASSERT_EQ(e.kind, Json::kObject);
    const std::string ph = Member(e, "ph").text;
    EXPECT_EQ(Member(e, "name").kind, Json::kString);
    EXPECT_EQ(Member(e, "pid").kind, Json::kNumber);
    EXPECT_EQ(Member(e, "tid").kind, Json::kNumber);
    if (ph == "X" || ph == "i") {
      EXPECT_EQ(Member(e, "cat").kind, Json::kString);
      EXPECT_EQ(Member(e, "ts").kind, Json::kNumber);
    }
    if (ph == "X") {
      EXPECT_EQ(Member(e, "dur").kind, Json::kNumber);
      EXPECT_GE(Member(e, "dur").Int(), 0);
    } else if (ph == "i") {
      EXPECT_EQ(Member(e, "s").text, "t");
    } else {
      EXPECT_EQ(ph, "M");
      EXPECT_EQ(Member(e, "args").kind, Json::kObject);
    }
  }
}

// tid -> lane name, from the thread_name metadata of process `pid`.
std::map<int64_t, std::string> LaneNames(const Json& doc, int pid) {
  std::map<int64_t, std::string> names;
  for (const Json* e : EventsWithPhase(doc, "M")) {
    if (Member(*e, "name").text == "thread_name" &&
        Member(*e, "pid").Int() == pid) {
      names[Member(*e, "tid").Int()] = Member(Member(*e, "args"), "name").text;
    }
  }
  return names;
}

int64_t Arg(const Json& event, const std::string& key) {
  return Member(Member(event, "args"), key).Int();
}

// ---- tests -----------------------------------------------------------------

TEST(TimelineTest, JsonCheckerRejectsMalformedText) {
  for (const std::string bad :
       {"{\"a\":[1,2}", "{\"a\":\"x\ny\"}", "{\"a\":\"\\q\"}", "[1,]",
        "{\"a\":1} x", "{\"a\" 1}", "\"\\ud800\""}) {
    Json doc;
    JsonReader reader(bad);
    EXPECT_FALSE(reader.Parse(&doc)) << bad;
  }
  EXPECT_FALSE(IsValidUtf8("a\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
}

TEST(TimelineTest, LanesAreStableAndNamedInMetadata) {
  Timeline timeline(3, "rank 3");
  const int compute = timeline.Lane("compute");
  const int push = timeline.Lane("push 0");
  EXPECT_EQ(compute, 1);
  EXPECT_EQ(push, 2);
  EXPECT_EQ(timeline.Lane("compute"), compute);
  EXPECT_EQ(timeline.pid(), 3);

  const Json doc = ParseOrFail(timeline.ToJson());
  ExpectWellFormedEvents(doc);
  const std::map<int64_t, std::string> expected = {{1, "compute"},
                                                   {2, "push 0"}};
  EXPECT_EQ(LaneNames(doc, 3), expected);
  bool named = false;
  for (const Json* e : EventsWithPhase(doc, "M")) {
    if (Member(*e, "name").text == "process_name") {
      EXPECT_EQ(Member(Member(*e, "args"), "name").text, "rank 3");
      EXPECT_EQ(Member(*e, "pid").Int(), 3);
      named = true;
    }
  }
  EXPECT_TRUE(named) << "no process_name metadata";
}

TEST(TimelineTest, ThreadsRecordOnTheirOwnLanes) {
  Timeline timeline(0, "rank 0");
  constexpr int kThreads = 4;
  constexpr int kEventsPerThread = 300;
  std::vector<int> lanes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&timeline, &lanes, t] {
      const int lane = timeline.Lane(StrCat("worker ", t));
      lanes[t] = lane;
      for (int i = 0; i < kEventsPerThread; ++i) {
        const int64_t begin = timeline.NowMicros();
        timeline.Complete(lane, StrCat("w", t, "-", i), "work", begin,
                          timeline.NowMicros(), {{"thread", t}, {"i", i}});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(timeline.recorded(), size_t{kThreads * kEventsPerThread});
  EXPECT_EQ(timeline.dropped(), 0u);

  const Json doc = ParseOrFail(timeline.ToJson());
  ExpectWellFormedEvents(doc);
  const std::map<int64_t, std::string> names = LaneNames(doc, 0);
  std::vector<int> per_thread(kThreads, 0);
  std::set<std::string> seen;
  for (const Json* e : EventsWithPhase(doc, "X")) {
    const int64_t t = Arg(*e, "thread");
    ASSERT_TRUE(t >= 0 && t < kThreads) << t;
    EXPECT_EQ(Member(*e, "tid").Int(), lanes[t]);
    EXPECT_EQ(names.at(lanes[t]), StrCat("worker ", t));
    EXPECT_EQ(Member(*e, "name").text, StrCat("w", t, "-", Arg(*e, "i")));
    ++per_thread[t];
    seen.insert(Member(*e, "name").text);
  }
  EXPECT_EQ(per_thread, std::vector<int>(kThreads, kEventsPerThread));
  EXPECT_EQ(seen.size(), size_t{kThreads * kEventsPerThread});
}

TEST(TimelineTest, OutputIsWellFormedTraceJson) {
  Timeline timeline(1, "rank 1");
  const int compute = timeline.Lane("compute");
  const int pull = timeline.Lane("pull 0");
  // Recorded inner-first, as scopes close; the file lists the outer first.
  timeline.Complete(compute, "conv1", "forward", 100, 150, {{"iter", 3}});
  timeline.Complete(compute, "iteration", "step", 100, 400);
  timeline.Complete(pull, "conv1/w", "pull", 120, 300,
                    {{"bytes", 4096}, {"iter", 3}});
  timeline.Instant(compute, "snapshot", "marker", 350);

  const std::string json = timeline.ToJson();
  const Json doc = ParseOrFail(json);
  ASSERT_EQ(doc.kind, Json::kObject);
  ExpectWellFormedEvents(doc);
  EXPECT_EQ(Member(doc, "displayTimeUnit").text, "ms");
  const Json& other = Member(doc, "otherData");
  EXPECT_EQ(Member(other, "recorded_events").Int(), 4);
  EXPECT_EQ(Member(other, "dropped_events").Int(), 0);
  EXPECT_EQ(Member(other, "pid").Int(), 1);

  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), 3u);
  EXPECT_EQ(Member(*complete[0], "name").text, "iteration");
  EXPECT_EQ(Member(*complete[0], "dur").Int(), 300);
  EXPECT_EQ(Member(*complete[1], "name").text, "conv1");
  EXPECT_EQ(Member(*complete[1], "cat").text, "forward");
  EXPECT_EQ(Member(*complete[1], "ts").Int(), 100);
  EXPECT_EQ(Member(*complete[1], "dur").Int(), 50);
  EXPECT_EQ(Member(*complete[1], "tid").Int(), compute);
  EXPECT_EQ(Arg(*complete[1], "iter"), 3);
  EXPECT_EQ(Member(*complete[2], "tid").Int(), pull);
  EXPECT_EQ(Arg(*complete[2], "bytes"), 4096);
  EXPECT_EQ(complete[0]->Find("args"), nullptr) << "empty args are left out";
  for (const Json* e : complete) EXPECT_EQ(Member(*e, "pid").Int(), 1);

  const std::vector<const Json*> instants = EventsWithPhase(doc, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(Member(*instants[0], "ts").Int(), 350);

  int64_t last_ts = std::numeric_limits<int64_t>::min();
  for (const Json& e : TraceEvents(doc)) {
    if (e.Find("ts") == nullptr) continue;
    EXPECT_GE(Member(e, "ts").Int(), last_ts) << "events not sorted by time";
    last_ts = Member(e, "ts").Int();
  }
}

TEST(TimelineTest, NegativeDurationsAreRecordedAsZero) {
  Timeline timeline(0, "rank 0");
  timeline.Complete(timeline.Lane("compute"), "late", "forward", 50, 40);
  const Json doc = ParseOrFail(timeline.ToJson());
  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(Member(*complete[0], "dur").Int(), 0);
}

TEST(TimelineTest, EscapesStrings) {
  const std::vector<std::string> names = {"say \"hi\"",
                                          "C:\\dir\\file",
                                          "line1\nline2\ttab\rcr\b\f",
                                          std::string("nul\0ctl\x01\x1f", 9),
                                          "caf\xc3\xa9 \xe2\x86\x92 ok",
                                          "</script>"};
  Timeline timeline(0, "rank \"0\"\n");
  const int lane = timeline.Lane("lane \\ \"q\"");
  for (const std::string& name : names) {
    timeline.Complete(lane, name, "cat\"\\", 0, 1);
  }
  timeline.Complete(lane, "bad\xff utf8\xc3", "forward", 2, 3);

  const std::string json = timeline.ToJson();
  EXPECT_NE(json.find("say \\\"hi\\\""), std::string::npos);
  EXPECT_NE(json.find("C:\\\\dir\\\\file"), std::string::npos);
  EXPECT_NE(json.find("line1\\nline2\\ttab\\rcr\\b\\f"), std::string::npos);
  EXPECT_NE(json.find("nul\\u0000ctl\\u0001\\u001f"), std::string::npos);

  const Json doc = ParseOrFail(json);
  ExpectWellFormedEvents(doc);
  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), names.size() + 1);
  for (size_t k = 0; k < names.size(); ++k) {
    EXPECT_EQ(Member(*complete[k], "name").text, names[k]);
    EXPECT_EQ(Member(*complete[k], "cat").text, "cat\"\\");
  }
  EXPECT_EQ(Member(*complete.back(), "name").text,
            "bad\xef\xbf\xbd utf8\xef\xbf\xbd");
  EXPECT_EQ(LaneNames(doc, 0).at(lane), "lane \\ \"q\"");
  EXPECT_EQ(Member(Member(doc, "otherData"), "process_name").text,
            "rank \"0\"\n");
}

TEST(TimelineTest, CapDropsAndCountsEvents) {
  TimelineOptions options;
  options.max_events = 10;
  Timeline timeline(2, "rank 2", options);
  const int lane = timeline.Lane("compute");
  for (int i = 0; i < 20; ++i) {
    timeline.Complete(lane, StrCat("e", i), "forward", i, i + 1);
  }
  for (int i = 0; i < 5; ++i) timeline.Instant(lane, "mark", "marker", 30);
  { TimelineScope scope(&timeline, lane, "scoped", "backward"); }
  EXPECT_EQ(timeline.recorded(), 10u);
  EXPECT_EQ(timeline.dropped(), 16u);

  const Json doc = ParseOrFail(timeline.ToJson());
  ExpectWellFormedEvents(doc);
  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), 10u) << "the first events are the ones kept";
  EXPECT_EQ(Member(*complete.back(), "name").text, "e9");
  EXPECT_TRUE(EventsWithPhase(doc, "i").empty());
  const Json& other = Member(doc, "otherData");
  EXPECT_EQ(Member(other, "dropped_events").Int(), 16);
  EXPECT_EQ(Member(other, "recorded_events").Int(), 10);
  EXPECT_EQ(Member(other, "max_events").Int(), 10);
  bool labelled = false;
  for (const Json* e : EventsWithPhase(doc, "M")) {
    if (Member(*e, "name").text != "process_labels") continue;
    const std::string label = Member(Member(*e, "args"), "labels").text;
    EXPECT_NE(label.find("dropped 16 events"), std::string::npos) << label;
    labelled = true;
  }
  EXPECT_TRUE(labelled) << "the viewer should show that events were dropped";
}

TEST(TimelineTest, WriteReplacesTheFileAtomically) {
  const std::string dir = test::MakeTempDir();
  const std::string path = dir + "/trace.json";
  WriteFileAtomically(path, "old contents");
  Timeline timeline(0, "rank 0");
  timeline.Complete(timeline.Lane("compute"), "conv1", "forward", 0, 10);
  timeline.Write(path);
  const std::string written = ReadFileToString(path);
  EXPECT_EQ(written, timeline.ToJson());
  ExpectWellFormedEvents(ParseOrFail(written));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"trace.json"})
      << "a temporary file was left behind";
}

TEST(TimelineTest, WriteToUnwritablePathNamesIt) {
  const std::string path = test::MakeTempDir() + "/no-such-dir/trace.json";
  Timeline timeline(0, "rank 0");
  try {
    timeline.Write(path);
    FAIL() << "Write to " << path << " did not throw";
  } catch (const IOError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("timeline"), std::string::npos) << message;
  }
}

TEST(TimelineTest, ScopeRecordsItsLifetimeAndArgs) {
  Timeline timeline(0, "rank 0");
  const int lane = timeline.Lane("compute");
  const int64_t before = timeline.NowMicros();
  {
    TimelineScope scope(&timeline, lane, "conv1", "forward");
    for (int k = 0; k < 6; ++k) scope.AddArg(k == 0 ? "iter" : "extra", k);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(timeline.recorded(), 0u) << "recorded before the scope ended";
  }
  const int64_t after = timeline.NowMicros();
  ASSERT_EQ(timeline.recorded(), 1u);

  const Json doc = ParseOrFail(timeline.ToJson());
  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), 1u);
  const Json& e = *complete[0];
  EXPECT_EQ(Member(e, "name").text, "conv1");
  EXPECT_EQ(Member(e, "cat").text, "forward");
  EXPECT_EQ(Member(e, "tid").Int(), lane);
  EXPECT_GE(Member(e, "ts").Int(), before);
  EXPECT_GE(Member(e, "dur").Int(), 2000);
  EXPECT_LE(Member(e, "ts").Int() + Member(e, "dur").Int(), after);
  EXPECT_EQ(Arg(e, "iter"), 0);
  EXPECT_EQ(Member(e, "args").members.size(), TimelineScope::kMaxArgs);
}

// A scope without a timeline records nothing anywhere, even with a lane no
// Timeline handed out, while one beside it on a timeline records its event.
TEST(TimelineTest, ScopeWithNullTimelineDoesNothing) {
  Timeline timeline(0, "rank 0");
  const int lane = timeline.Lane("compute");
  {
    TimelineScope scope(nullptr, 7, "conv1", "forward");
    scope.AddArg("bytes", 4096);
    TimelineScope recorded(&timeline, lane, "conv2", "forward");
  }
  ASSERT_EQ(timeline.recorded(), 1u);
  const Json doc = ParseOrFail(timeline.ToJson());
  const std::vector<const Json*> complete = EventsWithPhase(doc, "X");
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(Member(*complete[0], "name").text, "conv2");
}

TEST(TimelineTest, EpochSetsTheZeroOfTimestamps) {
  const auto epoch = std::chrono::steady_clock::now() - std::chrono::seconds(5);
  TimelineOptions options;
  options.epoch = epoch;
  Timeline timeline(0, "rank 0", options);
  EXPECT_EQ(timeline.ToMicros(epoch), 0);
  EXPECT_EQ(timeline.ToMicros(epoch + std::chrono::microseconds(1234)), 1234);
  const int64_t now = timeline.NowMicros();
  EXPECT_GE(now, 5000000);
  EXPECT_LT(now, 65000000);

  Timeline fresh(0, "rank 0");
  EXPECT_GE(fresh.NowMicros(), 0);
  EXPECT_LT(fresh.NowMicros(), 60000000) << "default epoch is construction";

  // The trace says where its zero lies on the steady clock.
  const Json doc = ParseOrFail(timeline.ToJson());
  const int64_t epoch_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          epoch.time_since_epoch())
          .count();
  EXPECT_EQ(Member(Member(doc, "otherData"), "steady_clock_epoch_us").Int(),
            epoch_us);
}

TEST(TimelineTest, PathForRank) {
  EXPECT_EQ(TimelinePathForRank("trace.json", 0, 1), "trace.json");
  EXPECT_EQ(TimelinePathForRank("trace.json", 2, 4), "trace.rank2.json");
  EXPECT_EQ(TimelinePathForRank("trace.json", 0, 4), "trace.rank0.json");
  EXPECT_EQ(TimelinePathForRank("out/trace.v2.json", 1, 2),
            "out/trace.v2.rank1.json");
  EXPECT_EQ(TimelinePathForRank("trace", 3, 4), "trace.rank3");
  EXPECT_EQ(TimelinePathForRank("run.d/trace", 1, 2), "run.d/trace.rank1");
  EXPECT_EQ(TimelinePathForRank("/tmp/.trace", 1, 2), "/tmp/.trace.rank1");
  EXPECT_EQ(TimelinePathForRank("/abs/t.json", 11, 16), "/abs/t.rank11.json");
}

TEST(TimelineTest, MergeJoinsRanksIntoOneTrace) {
  const std::string dir = test::MakeTempDir();
  TimelineOptions small;
  small.max_events = 1;
  Timeline rank0(0, "rank 0");
  Timeline rank1(1, "rank 1", small);
  rank0.Complete(rank0.Lane("compute"), "conv1", "forward", 0, 10);
  rank0.Complete(rank0.Lane("push 0"), "conv1/w", "push", 10, 30);
  rank1.Complete(rank1.Lane("compute"), "conv1", "forward", 1, 11);
  rank1.Complete(rank1.Lane("compute"), "conv2", "forward", 11, 20);
  const std::string trace = dir + "/trace.json";
  const std::string path0 = TimelinePathForRank(trace, 0, 2);
  const std::string path1 = TimelinePathForRank(trace, 1, 2);
  rank0.Write(path0);
  rank1.Write(path1);
  Timeline::Merge({path0, path1}, trace);

  const Json doc = ParseOrFail(ReadFileToString(trace));
  ExpectWellFormedEvents(doc);
  EXPECT_EQ(Member(doc, "displayTimeUnit").text, "ms");
  std::map<int64_t, int> complete_per_pid;
  for (const Json* e : EventsWithPhase(doc, "X")) {
    ++complete_per_pid[Member(*e, "pid").Int()];
  }
  EXPECT_EQ(complete_per_pid, (std::map<int64_t, int>{{0, 2}, {1, 1}}));
  EXPECT_EQ(LaneNames(doc, 0).size(), 2u);
  EXPECT_EQ(LaneNames(doc, 1).size(), 1u);
  const Json& other = Member(doc, "otherData");
  EXPECT_EQ(Member(other, "merged_inputs").Int(), 2);
  EXPECT_EQ(Member(other, "dropped_events").Int(), 1);

  // A merged trace merges again; no inputs give an empty but valid trace.
  const std::string twice = dir + "/twice.json";
  Timeline::Merge({trace, path0}, twice);
  const Json again = ParseOrFail(ReadFileToString(twice));
  EXPECT_EQ(EventsWithPhase(again, "X").size(), 5u);
  EXPECT_EQ(Member(Member(again, "otherData"), "dropped_events").Int(), 1);
  const std::string empty = dir + "/empty.json";
  Timeline::Merge({}, empty);
  EXPECT_TRUE(TraceEvents(ParseOrFail(ReadFileToString(empty))).empty());
}

TEST(TimelineTest, MergeRejectsMissingAndForeignFiles) {
  const std::string dir = test::MakeTempDir();
  const std::string foreign = dir + "/foreign.json";
  WriteFileAtomically(foreign, "{\"traceEvents\":[]}");
  for (const std::string& input : {foreign, dir + "/missing.json"}) {
    try {
      Timeline::Merge({input}, dir + "/out.json");
      FAIL() << "merging " << input << " did not throw";
    } catch (const IOError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'" + input + "'"), std::string::npos) << message;
    }
  }
  EXPECT_FALSE(FileExists(dir + "/out.json"));
}

}  // namespace
}  // namespace poseidon
