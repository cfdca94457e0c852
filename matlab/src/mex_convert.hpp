// Conversions between Octave/MATLAB arrays and the core's types for the
// caffe_ MEX module, with the checks that keep bad arguments away from the
// core's internal CHECKs: each throws MexError with an Octave error id.
//
// Note [Blob layout]
// Caffe stores a blob of shape (d0, d1, ..., dk) row-major: the last axis
// varies fastest. Octave arrays are column-major: the first dimension varies
// fastest. So the same memory, copied element for element, is an Octave
// array of size dk x ... x d1 x d0: a (num, channels, height, width) blob is
// width x height x channels x num in Octave, as in BVLC matcaffe. Shapes
// cross the interface reversed; data is copied without reordering. Octave
// arrays have at least two dimensions and drop trailing singleton ones, so a
// 0-axis blob is 1 x 1, a 1-axis blob of n elements is n x 1, and sizes are
// compared after padding the shorter one with ones.
#ifndef POSEIDON_MATLAB_MEX_CONVERT_HPP_
#define POSEIDON_MATLAB_MEX_CONVERT_HPP_

#include <string>
#include <vector>

#include "mex.h"
#include "poseidon/blob.hpp"

namespace poseidon {
namespace matlab {

// A char row vector (or '') as a string; `what` names it in errors.
std::string StringArg(const mxArray* a, const char* what);
// A real, finite, integer-valued numeric scalar in [lo, hi].
int64_t IntegerArg(const mxArray* a, const char* what, int64_t lo, int64_t hi);

// Octave's dimensions of `blob`: its shape reversed (see Note [Blob layout]).
std::vector<mwSize> OctaveDims(const std::vector<int>& shape);
// The blob shape as a 1 x num_axes double row vector, reversed.
mxArray* ShapeToArray(const std::vector<int>& shape);
// A 1 x k (or empty) vector of non-negative integers, reversed into a shape.
std::vector<int> ShapeFromArray(const mxArray* a, const char* what);

// A new single array holding the blob's data (or diff).
mxArray* BlobToArray(const Blob<float>& blob, bool diff);
// Copies a single array of the blob's size into its data (or diff); throws
// caffe:shapeError naming both sizes when they differ.
void ArrayToBlob(const mxArray* a, Blob<float>* blob, bool diff,
                 const char* what);

// An n x 1 cell array of strings.
mxArray* StringCell(const std::vector<std::string>& strings);
// An n x 1 double vector of 0-based indices turned 1-based.
mxArray* OneBasedIndices(const std::vector<int>& indices);

}  // namespace matlab
}  // namespace poseidon

#endif  // POSEIDON_MATLAB_MEX_CONVERT_HPP_
