// Array conversions of the caffe_ MEX module; see mex_convert.hpp.
#include "mex_convert.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <sstream>

#include "mex_handles.hpp"

namespace poseidon {
namespace matlab {
namespace {

std::string DimsString(const std::vector<mwSize>& dims) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? " " : "") << dims[i];
  os << "]";
  return os.str();
}

}  // namespace

std::string StringArg(const mxArray* a, const char* what) {
  if (a == nullptr || !mxIsChar(a) || mxGetM(a) > 1) {
    throw MexError("caffe:invalidArgument",
                   std::string(what) + " must be a string (a char row vector)");
  }
  char* chars = mxArrayToString(a);
  if (chars == nullptr) {
    throw MexError("caffe:invalidArgument",
                   std::string(what) + " could not be read as a string");
  }
  std::string s(chars);
  mxFree(chars);
  return s;
}

int64_t IntegerArg(const mxArray* a, const char* what, int64_t lo, int64_t hi) {
  if (a == nullptr || !mxIsNumeric(a) || mxIsComplex(a) ||
      mxGetNumberOfElements(a) != 1) {
    throw MexError("caffe:invalidArgument",
                   std::string(what) + " must be a real numeric scalar");
  }
  const double v = mxGetScalar(a);
  if (!std::isfinite(v) || v != std::floor(v) || v < static_cast<double>(lo) ||
      v > static_cast<double>(hi)) {
    std::ostringstream os;
    os << what << " must be an integer in [" << lo << ", " << hi << "], got "
       << v;
    throw MexError("caffe:invalidArgument", os.str());
  }
  return static_cast<int64_t>(v);
}

std::vector<mwSize> OctaveDims(const std::vector<int>& shape) {
  std::vector<mwSize> dims(shape.rbegin(), shape.rend());
  while (dims.size() < 2) dims.push_back(1);
  return dims;
}

mxArray* ShapeToArray(const std::vector<int>& shape) {
  mxArray* a = mxCreateDoubleMatrix(1, shape.size(), mxREAL);
  double* out = mxGetPr(a);
  for (size_t i = 0; i < shape.size(); ++i) {
    out[shape.size() - 1 - i] = shape[i];
  }
  return a;
}

std::vector<int> ShapeFromArray(const mxArray* a, const char* what) {
  if (a == nullptr || !mxIsDouble(a) || mxIsComplex(a) ||
      (mxGetNumberOfElements(a) > 0 && mxGetM(a) != 1 && mxGetN(a) != 1) ||
      mxGetNumberOfDimensions(a) > 2) {
    throw MexError("caffe:invalidArgument",
                   std::string(what) + " must be a real double vector");
  }
  const size_t n = mxGetNumberOfElements(a);
  if (n > static_cast<size_t>(kMaxBlobAxes)) {
    std::ostringstream os;
    os << what << " has " << n << " axes; blobs have at most " << kMaxBlobAxes;
    throw MexError("caffe:shapeError", os.str());
  }
  const double* in = mxGetPr(a);
  std::vector<int> shape(n);
  for (size_t i = 0; i < n; ++i) {
    const double v = in[i];
    if (!std::isfinite(v) || v != std::floor(v) || v < 0 || v > INT_MAX) {
      std::ostringstream os;
      os << what << " element " << i + 1 << " is " << v
         << "; dimensions must be integers in [0, " << INT_MAX << "]";
      throw MexError("caffe:shapeError", os.str());
    }
    shape[n - 1 - i] = static_cast<int>(v);
  }
  return shape;
}

mxArray* BlobToArray(const Blob<float>& blob, bool diff) {
  const std::vector<mwSize> dims = OctaveDims(blob.shape());
  mxArray* a =
      mxCreateNumericArray(dims.size(), dims.data(), mxSINGLE_CLASS, mxREAL);
  if (blob.count() > 0) {
    const float* src = diff ? blob.cpu_diff() : blob.cpu_data();
    std::memcpy(mxGetData(a), src, sizeof(float) * blob.count());
  }
  return a;
}

void ArrayToBlob(const mxArray* a, Blob<float>* blob, bool diff,
                 const char* what) {
  if (a == nullptr || !mxIsSingle(a) || mxIsComplex(a)) {
    throw MexError("caffe:invalidArgument",
                   std::string(what) + " must be a real single array");
  }
  std::vector<mwSize> want = OctaveDims(blob->shape());
  const mwSize* got_ptr = mxGetDimensions(a);
  std::vector<mwSize> got(got_ptr, got_ptr + mxGetNumberOfDimensions(a));
  const size_t n = std::max(want.size(), got.size());
  std::vector<mwSize> want_padded = want, got_padded = got;
  want_padded.resize(n, 1);
  got_padded.resize(n, 1);
  if (want_padded != got_padded) {
    std::vector<mwSize> caffe_shape(blob->shape().begin(), blob->shape().end());
    throw MexError("caffe:shapeError",
                   std::string(what) + " has size " + DimsString(got) +
                       "; the blob takes size " + DimsString(want) +
                       " (its Caffe shape " + DimsString(caffe_shape) +
                       " reversed)");
  }
  if (blob->count() == 0) return;
  float* dst = diff ? blob->mutable_cpu_diff() : blob->mutable_cpu_data();
  std::memcpy(dst, mxGetData(a), sizeof(float) * blob->count());
}

mxArray* StringCell(const std::vector<std::string>& strings) {
  mxArray* cell = mxCreateCellMatrix(strings.size(), 1);
  for (size_t i = 0; i < strings.size(); ++i) {
    mxSetCell(cell, i, mxCreateString(strings[i].c_str()));
  }
  return cell;
}

mxArray* OneBasedIndices(const std::vector<int>& indices) {
  mxArray* a = mxCreateDoubleMatrix(indices.size(), 1, mxREAL);
  double* out = mxGetPr(a);
  for (size_t i = 0; i < indices.size(); ++i) out[i] = indices[i] + 1.0;
  return a;
}

}  // namespace matlab
}  // namespace poseidon
