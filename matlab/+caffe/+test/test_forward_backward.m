function test_forward_backward()
% net.forward / net.backward against values computed here: an InnerProduct
% (y = W' x + b with W stored K x N in Octave, Caffe's N x K reversed), its
% gradients, and a Convolution with a non-square kernel computed by loops
% (Octave weights kw x kh x C x num_output).

model = caffe.test.write_file({
  'name: "fb" force_backward: true'
  'layer { name: "in" type: "Input" top: "data"'
  '  input_param { shape { dim: 3 dim: 2 dim: 2 dim: 3 } } }'
  'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"'
  '  inner_product_param { num_output: 4 } }'
});
cleanup = onCleanup(@() delete(model));
net = caffe.Net(model, 'train');
assert(isequal(net.inputs, {'data'}) && isequal(net.outputs, {'ip'}));
assert(isequal(net.params('ip', 1).shape(), [12 4]), 'weights K x N');
assert(isequal(net.params('ip', 2).shape(), 4), 'bias');

W = randn(12, 4, 'single');
b = randn(4, 1, 'single');
x = randn(3, 2, 2, 3, 'single');  % W x H x C x N: 3 samples of 12 values
net.params('ip', 1).set_data(W);
net.params('ip', 2).set_data(b);
res = net.forward({x});
assert(iscell(res) && isequal(size(res), [1 1]), 'one output, in a cell');
X = reshape(double(x), 12, 3);
expected = double(W)' * X + double(b);
assert(isequal(size(res{1}), [4 3]), 'ip is N x num');
assert(double(res{1}), expected, 1e-5 * max(abs(expected(:))));

% Backward: input diff W g, weight diff X g', bias diff sum(g).
g = randn(4, 3, 'single');
net.params('ip', 1).set_diff(zeros(12, 4));
net.params('ip', 2).set_diff(zeros(4, 1));
dres = net.backward({g});
assert(iscell(dres) && numel(dres) == 1);
assert(double(dres{1}), reshape(double(W) * double(g), 3, 2, 2, 3), 1e-4);
assert(double(net.params('ip', 1).get_diff()), X * double(g)', 1e-4);
assert(double(net.params('ip', 2).get_diff()), sum(double(g), 2), 1e-4);

% Convolution: 2 channels, 5 wide x 4 high, kernel 3 high x 2 wide.
model = caffe.test.write_file({
  'name: "conv"'
  'layer { name: "in" type: "Input" top: "data"'
  '  input_param { shape { dim: 2 dim: 2 dim: 4 dim: 5 } } }'
  'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"'
  '  convolution_param { num_output: 3 kernel_h: 3 kernel_w: 2 } }'
});
cleanup2 = onCleanup(@() delete(model));
net = caffe.Net(model, 'test');
w = randn(2, 3, 2, 3, 'single');  % kw x kh x C x num_output
assert(isequal(net.params('conv', 1).shape(), size(w)));
bias = randn(3, 1, 'single');
net.params('conv', 1).set_data(w);
net.params('conv', 2).set_data(bias);
d = randn(5, 4, 2, 2, 'single');
out = net.forward({d});
out = double(out{1});
assert(isequal(size(out), [4 2 3 2]), 'conv output 4 wide x 2 high');
expected = zeros(4, 2, 3, 2);
for n = 1:2
  for o = 1:3
    for yy = 1:2
      for xx = 1:4
        patch = double(d(xx:xx + 1, yy:yy + 2, :, n));
        expected(xx, yy, o, n) = sum(sum(sum(patch .* double(w(:, :, :, o))))) ...
                                 + double(bias(o));
      end
    end
  end
end
assert(out, expected, 1e-4);
end
