// OpenCV's image codecs (cv::imread, imdecode, imencode, imwrite), loaded on
// first use from the plugin libposeidon_imgcodecs.so that sits beside
// libposeidon.so (OpenCV builds only).
//
// Why a plugin: Debian's libopencv-imgcodecs links GDAL and, through it,
// about 150 more shared libraries; loading them took every process that
// linked Poseidon about 0.2 s at start (poseidon_train --version, each of
// the test binary's runs, `import caffe`), though few ever decode an
// image. Linked by the plugin only, they load when the first image does.
//
// The functions behave as the cv:: ones they are named after (a
// cv::Exception from OpenCV passes through). A plugin that cannot be loaded
// throws IOError naming where it was looked for and why. Thread-safe.
#ifndef POSEIDON_UTIL_IMAGE_CODECS_HPP_
#define POSEIDON_UTIL_IMAGE_CODECS_HPP_

#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace poseidon {
namespace codecs {

// cv::imread(filename, flags).
cv::Mat Read(const std::string& filename, int flags);
// cv::imdecode(buffer, flags).
cv::Mat Decode(const cv::Mat& buffer, int flags);
// cv::imencode(extension, image, bytes) (extension with its dot: ".png").
bool Encode(const std::string& extension, const cv::Mat& image,
            std::vector<uchar>* bytes);
// cv::imwrite(filename, image).
bool Write(const std::string& filename, const cv::Mat& image);

// Where the plugin is looked for first: the folder of the loaded
// libposeidon.so (the build tree's lib/, an installed lib/, the wheel's
// caffe/), else the loader's search path.
std::string PluginPath();

}  // namespace codecs
}  // namespace poseidon

#endif  // POSEIDON_UTIL_IMAGE_CODECS_HPP_
