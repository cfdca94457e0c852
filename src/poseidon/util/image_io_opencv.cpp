// Image reading, encoding and Datum conversion with OpenCV (core and
// imgproc here; the codecs through the plugin of image_codecs.hpp), and the
// image list parser.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <opencv2/imgcodecs.hpp>  // the IMREAD_* flags (constants only)
#include <opencv2/imgproc.hpp>

#include "poseidon/util/image_codecs.hpp"
#include "poseidon/util/image_io.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace {

string Lower(string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Whether the file's extension names `encoding` ("jpg" and "jpeg" agree).
bool HasExtension(const string& filename, const string& encoding) {
  const size_t dot = filename.rfind('.');
  if (dot == string::npos) return false;
  auto canonical = [](string e) { return e == "jpeg" ? string("jpg") : e; };
  return canonical(Lower(filename.substr(dot + 1))) ==
         canonical(Lower(encoding));
}

// Runs an OpenCV call; a cv::Exception it throws (a failed allocation for
// an image whose header declares a huge size, a decoder's error) becomes an
// IOError that starts with `what`.
template <typename F>
auto CallOpenCV(const string& what, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const cv::Exception& e) {
    POSEIDON_THROW(IOError, what, ": OpenCV failed: ",
                   e.err.empty() ? string(e.what()) : e.err);
  }
}

cv::Mat Decode(const Datum& datum, int flags) {
  POSEIDON_REQUIRE(datum.encoded(), Error,
                   "cannot decode a datum that holds raw pixels");
  const string& bytes = datum.data();
  const string what =
      StrCat("cannot decode an encoded datum (", bytes.size(), " bytes)");
  cv::Mat image = CallOpenCV(what, [&] {
    const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1,
                         const_cast<char*>(bytes.data()));
    return codecs::Decode(buffer, flags);
  });
  POSEIDON_REQUIRE(!image.empty(), IOError, what,
                   ": not an image OpenCV can read");
  return image;
}

}  // namespace

cv::Mat ReadImageToCVMat(const string& filename, int height, int width,
                         bool is_color) {
  POSEIDON_REQUIRE((height > 0) == (width > 0), ConfigError,
                   "resizing needs both a height and a width (got ", height,
                   "x", width, ")");
  // Checked first: OpenCV would also print its own warning.
  POSEIDON_REQUIRE(FileExists(filename), IOError, "cannot read image '",
                   filename, "': no such file");
  const string what = StrCat("cannot read image '", filename, "'");
  cv::Mat image = CallOpenCV(what, [&] {
    return codecs::Read(filename,
                        is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  });
  POSEIDON_REQUIRE(!image.empty(), IOError, what,
                   ": not an image OpenCV can decode");
  if (height > 0 && (image.rows != height || image.cols != width)) {
    return CallOpenCV(StrCat("cannot resize image '", filename, "'"), [&] {
      cv::Mat resized;
      cv::resize(image, resized, cv::Size(width, height));
      return resized;
    });
  }
  return image;
}

void ReadImageToDatum(const string& filename, int label, int height, int width,
                      bool is_color, const string& encoding, Datum* datum) {
  if (encoding.empty()) {
    CVMatToDatum(ReadImageToCVMat(filename, height, width, is_color), datum);
    datum->set_label(label);
    return;
  }
  datum->Clear();
  datum->set_label(label);
  datum->set_encoded(true);
  if (height == 0 && width == 0 && HasExtension(filename, encoding)) {
    // The file may already be what we would write: same format, size and
    // number of channels. Then keep its bytes rather than re-encoding.
    string bytes = ReadFileToString(filename);
    datum->set_data(bytes);
    bool decodable = false;
    try {
      decodable =
          DecodeDatumToCVMatNative(*datum).channels() == (is_color ? 3 : 1);
    } catch (const IOError&) {
      POSEIDON_THROW(IOError, "cannot read image '", filename,
                     "': not an image OpenCV can decode");
    }
    if (decodable) return;
  }
  const cv::Mat image = ReadImageToCVMat(filename, height, width, is_color);
  std::vector<uchar> buffer;
  const string what =
      StrCat("cannot encode '", filename, "' as '", encoding, "'");
  bool encoded = false;
  try {
    encoded = codecs::Encode("." + encoding, image, &buffer);
  } catch (const cv::Exception& e) {
    POSEIDON_THROW(ConfigError, what, ": OpenCV failed: ",
                   e.err.empty() ? string(e.what()) : e.err);
  }
  POSEIDON_REQUIRE(encoded, ConfigError, what);
  datum->set_data(string(buffer.begin(), buffer.end()));
}

cv::Mat DecodeDatumToCVMat(const Datum& datum, bool is_color) {
  return Decode(datum, is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
}

cv::Mat DecodeDatumToCVMatNative(const Datum& datum) {
  return Decode(datum, cv::IMREAD_ANYCOLOR);
}

void CVMatToDatum(const cv::Mat& image, Datum* datum) {
  POSEIDON_REQUIRE(image.depth() == CV_8U, ShapeError,
                   "only 8-bit images can be stored in a Datum (depth ",
                   image.depth(), ")");
  const int channels = image.channels();
  const int height = image.rows;
  const int width = image.cols;
  datum->set_channels(channels);
  datum->set_height(height);
  datum->set_width(width);
  datum->clear_float_data();
  datum->set_encoded(false);
  string pixels(static_cast<size_t>(channels) * height * width, '\0');
  for (int h = 0; h < height; ++h) {
    const uchar* row = image.ptr<uchar>(h);
    for (int w = 0; w < width; ++w) {
      for (int c = 0; c < channels; ++c) {
        pixels[(static_cast<size_t>(c) * height + h) * width + w] =
            static_cast<char>(row[w * channels + c]);
      }
    }
  }
  datum->set_data(std::move(pixels));
}

vector<std::pair<string, int>> ReadImageList(const string& list_file) {
  std::ifstream in(list_file);
  if (!in) {
    POSEIDON_THROW(IOError, "cannot open image list '", list_file,
                   "': ", std::strerror(errno));
  }
  vector<std::pair<string, int>> entries;
  string line;
  int line_number = 0;
  const char* kSpace = " \t\r\n\f\v";
  while (std::getline(in, line)) {
    ++line_number;
    const size_t last = line.find_last_not_of(kSpace);
    if (last == string::npos) continue;  // blank line
    const string text = line.substr(0, last + 1);
    const size_t split = text.find_last_of(kSpace);
    const size_t path_end = split == string::npos
                                ? string::npos
                                : text.find_last_not_of(kSpace, split);
    const size_t path_begin = text.find_first_not_of(kSpace);
    bool ok = path_end != string::npos && path_begin <= path_end;
    long label = 0;
    if (ok) {
      const string field = text.substr(split + 1);
      char* end = nullptr;
      errno = 0;
      label = std::strtol(field.c_str(), &end, 10);
      ok = *end == '\0' && errno == 0 && label >= INT32_MIN &&
           label <= INT32_MAX;
    }
    POSEIDON_REQUIRE(ok, IOError, list_file, ":", line_number,
                     ": expected '<image path> <integer label>', got '", text,
                     "'");
    entries.emplace_back(text.substr(path_begin, path_end - path_begin + 1),
                         static_cast<int>(label));
  }
  POSEIDON_REQUIRE(!in.bad(), IOError, "error reading image list '", list_file,
                   "'");
  POSEIDON_REQUIRE(!entries.empty(), IOError, "image list '", list_file,
                   "' has no entries");
  return entries;
}

}  // namespace poseidon
