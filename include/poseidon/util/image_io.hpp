// Image files and Datums (OpenCV builds only: the implementation is
// image_io_opencv.cpp). Reading resizes when a target size is given, and
// converts to 3-channel BGR or 1-channel gray. A Datum stores pixels as uint8
// channel-major (C x H x W), or an encoded image (PNG/JPEG bytes) with
// encoded = true. Also the "path label" list files of ImageData and
// convert_imageset.
//
// Errors: an unreadable image throws IOError naming the path; a bad list line
// throws IOError naming the list file and line.
#ifndef POSEIDON_UTIL_IMAGE_IO_HPP_
#define POSEIDON_UTIL_IMAGE_IO_HPP_

#include <opencv2/core.hpp>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

// Reads an image; height/width of 0 keep the stored size (both or neither
// must be 0). is_color: 3-channel BGR, else 1-channel gray.
cv::Mat ReadImageToCVMat(const string& filename, int height, int width,
                         bool is_color);

// Reads an image into a Datum with the given label. With an empty encoding
// the Datum holds raw pixels; with an encoding ("png", "jpg", ...) it holds
// the encoded image: the file's own bytes when they already are in that
// format at the requested size and colour, else the image re-encoded.
void ReadImageToDatum(const string& filename, int label, int height, int width,
                      bool is_color, const string& encoding, Datum* datum);

// Decodes an encoded Datum as 3-channel (is_color) or 1-channel; Native keeps
// the stored channels. Throws IOError if the bytes are not an image.
cv::Mat DecodeDatumToCVMat(const Datum& datum, bool is_color);
cv::Mat DecodeDatumToCVMatNative(const Datum& datum);

// Stores an 8-bit image (HWC) as raw channel-major pixels; keeps the label.
// Throws ShapeError for images that are not 8-bit.
void CVMatToDatum(const cv::Mat& image, Datum* datum);

// Reads "path label" lines (the label is the last whitespace-separated field,
// so paths may contain spaces; blank lines are skipped).
vector<std::pair<string, int>> ReadImageList(const string& list_file);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_IMAGE_IO_HPP_
