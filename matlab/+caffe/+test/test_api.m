function test_api()
% The shape of matcaffe's API, as scripts written for BVLC's matcaffe use
% it: Net properties and accessors, Layer params and type, inputs/outputs
% as column cells, forward/backward_prefilled, the phase rules, Solver
% construction through both entry points, caffe.version, the settings.

model = caffe.test.write_file({
  'name: "api" force_backward: true'
  'layer { type: "DummyData" name: "data" top: "data" top: "label"'
  '  dummy_data_param { shape { dim: 5 dim: 2 dim: 3 dim: 4 } shape { dim: 5 }'
  '    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" } } }'
  'layer { type: "Convolution" name: "conv" bottom: "data" top: "conv"'
  '  convolution_param { num_output: 11 kernel_size: 2 pad: 3'
  '    weight_filler { type: "gaussian" std: 1 }'
  '    bias_filler { type: "constant" value: 2 } } }'
  'layer { type: "Dropout" name: "drop" bottom: "conv" top: "conv"'
  '  include { phase: TRAIN } }'
  'layer { type: "InnerProduct" name: "ip" bottom: "conv" top: "ip"'
  '  inner_product_param { num_output: 13 weight_filler { type: "gaussian" std: 2.5 } } }'
  'layer { type: "SoftmaxWithLoss" name: "loss" bottom: "ip" bottom: "label"'
  '  top: "loss" }'
});
solver_file = caffe.test.write_file({['net: "' model '"'], ...
  'base_lr: 0.01 momentum: 0.9 lr_policy: "inv" gamma: 0.0001 power: 0.75', ...
  'display: 0 max_iter: 20 snapshot_after_train: false', 'type: "Adam"'});
cleanup = onCleanup(@() delete(model, solver_file));

assert(ischar(caffe.version()) && ~isempty(regexp(caffe.version(), '^\d+\.\d+', 'once')));
caffe.set_mode_cpu();
caffe.set_random_seed(3);
caffe.init_log(2);

net = caffe.Net(model, 'train');
assert(isa(net, 'caffe.Net') && isa(caffe.get_net(model, 'test'), 'caffe.Net'));
assert(strcmp(net.name, 'api'));
assert(isequal(net.inputs, cell(0, 1)), 'no inputs');
assert(isequal(net.outputs, {'loss'}));
assert(iscolumn(net.layer_names) && iscolumn(net.blob_names));
assert(isequal(net.layer_names', {'data', 'conv', 'drop', 'ip', 'loss'}));
test_net = caffe.Net(model, 'test');
assert(isequal(test_net.layer_names', {'data', 'conv', 'ip', 'loss'}), ...
       'the TRAIN-only layer is left out in test');
assert(numel(net.layer_vec) == 5 && isa(net.layer_vec(2), 'caffe.Layer'));
assert(numel(net.blob_vec) == numel(net.blob_names));
assert(net.name2layer_index('ip') == 4 && net.name2blob_index('data') == 1);
assert(isequal(net.params('conv', 1).shape(), [2 2 2 11]));
assert(isequal(net.layers('conv').params(2).shape(), 11));
assert(numel(net.layers('conv').params) == 2 && isempty(net.layers('loss').params));
assert(strcmp(net.layers('conv').type(), 'Convolution'));
assert(strcmp(net.layer_vec(1).name, 'data'));

net.blobs('label').set_data(randi(12, [net.blobs('label').shape() 1]) - 1);
loss = net.forward_prefilled();
assert(isfinite(loss) && abs(loss - net.blobs('loss').get_data()) < 1e-6);
net.backward_prefilled();
assert(any(net.params('ip', 1).get_diff()(:) ~= 0), 'backward made gradients');

solver = caffe.Solver(solver_file);
assert(strcmp(solver.type, 'Adam') && isa(solver.net, 'caffe.Net'));
assert(isempty(solver.test_nets) && isa(solver.test_nets, 'caffe.Net'));
solver2 = caffe.get_solver(solver_file);
solver2.step(3);
assert(solver2.iter() == 3 && solver.iter() == 0, 'solvers are separate');
solver.solve();
assert(solver.iter() == 20);
end
