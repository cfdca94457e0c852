// The image codecs plugin, libposeidon_imgcodecs.so: the only part of
// Poseidon that links OpenCV's imgcodecs (see image_codecs.hpp for why).
// Each function has the type of its alias in imgcodecs_plugin.hpp.
#include <opencv2/imgcodecs.hpp>
#include <type_traits>

#include "imgcodecs_plugin.hpp"

namespace codecs = poseidon::codecs;

extern "C" {

__attribute__((visibility("default"))) void poseidon_imgcodecs_read(
    const std::string& filename, int flags, cv::Mat* out) {
  *out = cv::imread(filename, flags);
}

__attribute__((visibility("default"))) void poseidon_imgcodecs_decode(
    const cv::Mat& buffer, int flags, cv::Mat* out) {
  *out = cv::imdecode(buffer, flags);
}

__attribute__((visibility("default"))) bool poseidon_imgcodecs_encode(
    const std::string& extension, const cv::Mat& image,
    std::vector<uchar>* bytes) {
  return cv::imencode(extension, image, *bytes);
}

__attribute__((visibility("default"))) bool poseidon_imgcodecs_write(
    const std::string& filename, const cv::Mat& image) {
  return cv::imwrite(filename, image);
}

}  // extern "C"

// The exports have the types the loader casts them to.
static_assert(std::is_same_v<decltype(&poseidon_imgcodecs_read),
                             codecs::ReadFn>);
static_assert(std::is_same_v<decltype(&poseidon_imgcodecs_decode),
                             codecs::DecodeFn>);
static_assert(std::is_same_v<decltype(&poseidon_imgcodecs_encode),
                             codecs::EncodeFn>);
static_assert(std::is_same_v<decltype(&poseidon_imgcodecs_write),
                             codecs::WriteFn>);
