function test_weights()
% Weights saved from Octave load back bit for bit (copy_from and the
% three-argument constructor), the outputs then agree exactly, and weights
% of the wrong shape are refused with an error naming the layer.

lines = {
  'name: "w"'
  'layer { name: "in" type: "Input" top: "data"'
  '  input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }'
  'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"'
  '  convolution_param { num_output: 4 kernel_size: 3'
  '    weight_filler { type: "gaussian" std: 0.1 }'
  '    bias_filler { type: "gaussian" std: 0.1 } } }'
  'layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }'
  'layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"'
  '  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }'
};
model = caffe.test.write_file(lines);
dir_name = tempname();
mkdir(dir_name);
cleanup = onCleanup(@() cleanup_files(model, dir_name));

caffe.set_random_seed(11);
net1 = caffe.Net(model, 'test');
% Values set from Octave, so nothing depends on the fillers.
for name = {'conv', 'ip'}
  for i = 1:2
    p = net1.params(name{1}, i);
    p.set_data(randn([p.shape() 1], 'single'));
  end
end
weights = fullfile(dir_name, 'w.caffemodel');
net1.save(weights);
assert(exist(weights, 'file') == 2);

caffe.set_random_seed(12);
net2 = caffe.Net(model, 'test');
assert(~isequal(net2.params('conv', 1).get_data(), ...
                net1.params('conv', 1).get_data()), ...
       'a fresh net must start from other weights for this test to mean anything');
net2.copy_from(weights);
net3 = caffe.Net(model, weights, 'test');
for l = 1:numel(net1.layer_vec)
  for i = 1:numel(net1.layer_vec(l).params)
    w1 = net1.layer_vec(l).params(i).get_data();
    assert(isequal(w1, net2.layer_vec(l).params(i).get_data()), ...
           'copy_from: layer %d blob %d differs', l, i);
    assert(isequal(w1, net3.layer_vec(l).params(i).get_data()), ...
           'Net(model, weights, phase): layer %d blob %d differs', l, i);
  end
end
x = {randn(5, 6, 3, 2, 'single')};
y1 = net1.forward(x);
y3 = net3.forward(x);
assert(isequal(y1, y3), 'same weights, same outputs');

% A caffemodel for another shape of layer is refused (layers before the bad
% one are loaded, as in Caffe); the net stays usable.
other = strrep(strjoin(lines', sprintf('\n')), 'num_output: 3', 'num_output: 7');
other_model = caffe.test.write_file(other, dir_name);
other_weights = fullfile(dir_name, 'other.caffemodel');
caffe.Net(other_model, 'test').save(other_weights);
caffe.test.expect_error(@() net2.copy_from(other_weights), ...
                        'caffe:shapeError', 'ip');
net2.copy_from(weights);
assert(isequal(net2.forward(x), y1), 'net2 works after the failed load');
caffe.test.expect_error(@() net1.save(fullfile(dir_name, 'no', 'such', 'w')), ...
                        'caffe:fileError', 'no/such');
end

function cleanup_files(model, dir_name)
delete(model);
caffe.test.remove_dir(dir_name);
end
