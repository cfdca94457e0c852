"""Protocol buffer messages of Poseidon's Caffe-compatible schema.

``caffe_pb2`` is generated at build time from src/poseidon/proto/caffe.proto.
"""
