function test_blob_layout()
% Blobs cross into Octave with Caffe's shape reversed and their memory as it
% is (width x height x channels x num): shapes, data and diff round trips,
% 0-, 1- and 2-axis blobs, reshape, and layers of the core reading the
% arrays along the axes Octave says they have.

model = caffe.test.write_file({
  'name: "layout"'
  'layer { name: "in" type: "Input" top: "data" top: "vec" top: "mat"'
  '  input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 }'
  '                shape { dim: 7 } shape { dim: 3 dim: 6 } } }'
  'layer { name: "slice" type: "Slice" bottom: "data" top: "c1" top: "c2" top: "c3"'
  '  slice_param { axis: 1 } }'
  'layer { name: "flat" type: "Flatten" bottom: "data" top: "flat" }'
  'layer { name: "persample" type: "Reduction" bottom: "data" top: "persample"'
  '  reduction_param { axis: 1 operation: SUM } }'
  'layer { name: "total" type: "Reduction" bottom: "vec" top: "total" }'
  'layer { name: "silence" type: "Silence" bottom: "mat" bottom: "c1" bottom: "c2" }'
});
cleanup = onCleanup(@() delete(model));
net = caffe.Net(model, 'test');

data = net.blobs('data');
assert(isequal(data.shape(), [5 4 3 2]), 'data shape %s', mat2str(data.shape()));
assert(isequal(net.blobs('vec').shape(), 7));
assert(isequal(net.blobs('mat').shape(), [6 3]));
assert(isequal(net.blobs('total').shape(), zeros(1, 0)), ...
       'a 0-axis blob has an empty shape');

% Data round trips bit for bit, as single; other classes are converted.
x = randn(5, 4, 3, 2, 'single');
data.set_data(x);
got = data.get_data();
assert(isa(got, 'single') && isequal(got, x), 'data round trip');
data.set_diff(-2 * x);
assert(isequal(data.get_diff(), -2 * x), 'diff round trip');
assert(isequal(data.get_data(), x), 'set_diff left data alone');
data.set_data(double(x) + 1);
assert(isequal(data.get_data(), single(double(x) + 1)), 'double input');
data.set_data(x);

v = single(1:7)';
net.blobs('vec').set_data(v);
assert(isequal(size(net.blobs('vec').get_data()), [7 1]));
net.blobs('mat').set_data(reshape(single(1:18), 6, 3));

net.forward_prefilled();
% Slice along Caffe's axis 1 (channels) = Octave's third dimension.
for c = 1:3
  got = net.blobs(sprintf('c%d', c)).get_data();
  assert(isequal(size(got), [5 4 1 2]), 'slice size %s', mat2str(size(got)));
  assert(isequal(got, x(:, :, c, :)), 'slice %d is x(:, :, %d, :)', c, c);
end
% Flatten keeps memory order: Caffe (2, 60) is Octave 60 x 2.
assert(isequal(net.blobs('flat').get_data(), reshape(x, 60, 2)));
% A sum per sample (Caffe axis 0 = Octave's last dimension).
expected = sum(reshape(double(x), 60, 2), 1)';
assert(net.blobs('persample').get_data(), single(expected), 1e-4);
% A 0-axis blob is a 1 x 1 array.
total = net.blobs('total').get_data();
assert(isequal(size(total), [1 1]) && total == 28, 'sum of 1..7');

% reshape takes Octave's order; net.reshape() carries it through the net.
data.reshape([5 4 3 1]);
assert(isequal(data.shape(), [5 4 3 1]), 'shape keeps every axis');
net.reshape();
assert(isequal(net.blobs('flat').shape(), [60 1]));
assert(isequal(net.blobs('c1').shape(), [5 4 1 1]));
net.blobs('mat').reshape([6 5 4 3 2 1]);
assert(isequal(net.blobs('mat').shape(), [6 5 4 3 2 1]), ...
       'a leading 1 in Caffe''s shape stays');
y = rand(5, 4, 3, 'single');
data.set_data(y);
net.forward_prefilled();
assert(isequal(net.blobs('flat').get_data(), y(:)));
end
