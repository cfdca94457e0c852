// The interface between libposeidon and its image codecs plugin
// (image_codecs.hpp): the plugin, imgcodecs_plugin_opencv.cpp, exports these
// functions with C names; libposeidon finds them with dlsym. Both sides are
// built from one tree, with the same OpenCV and C++ runtime, so C++ types
// cross; a cv::Exception thrown in the plugin reaches the caller.
#ifndef POSEIDON_UTIL_IMGCODECS_PLUGIN_HPP_
#define POSEIDON_UTIL_IMGCODECS_PLUGIN_HPP_

#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace poseidon {
namespace codecs {

using ReadFn = void (*)(const std::string& filename, int flags, cv::Mat* out);
using DecodeFn = void (*)(const cv::Mat& buffer, int flags, cv::Mat* out);
using EncodeFn = bool (*)(const std::string& extension, const cv::Mat& image,
                          std::vector<uchar>* bytes);
using WriteFn = bool (*)(const std::string& filename, const cv::Mat& image);

}  // namespace codecs
}  // namespace poseidon

#endif  // POSEIDON_UTIL_IMGCODECS_PLUGIN_HPP_
