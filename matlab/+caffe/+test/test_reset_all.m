function test_reset_all()
% caffe.reset_all() frees every net and solver and makes every object that
% referred to them fail with a clear error; deleting the last Octave object
% that refers to a net frees it without a reset; a Blob or Layer keeps its
% net alive.

model = caffe.test.write_file({
  'name: "r"'
  'layer { name: "in" type: "Input" top: "data"'
  '  input_param { shape { dim: 1 dim: 3 } } }'
  'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"'
  '  inner_product_param { num_output: 2 } }'
});
solver_file = caffe.test.write_file({['net: "' model '"'], 'base_lr: 0.1', ...
                                      'lr_policy: "fixed"', 'display: 0'});
cleanup = onCleanup(@() delete(model, solver_file));

c = caffe.reset_all();
assert(c.nets == 0 && c.solvers == 0, 'run_tests starts each test clean');

% reset_all frees a live net and invalidates its objects.
net = caffe.Net(model, 'test');
blob = net.blobs('ip');
layer = net.layers('ip');
weights = net.params('ip', 1);
c = caffe.reset_all();
assert(c.nets == 1 && c.solvers == 0, 'one net was alive: %d', c.nets);
E = @caffe.test.expect_error;
E(@() net.forward_prefilled(), 'caffe:invalidHandle', ...
  {'caffe.Net', 'reset_all'});
E(@() net.forward({1:3}), 'caffe:invalidHandle', {'caffe.Blob', 'reset_all'});
E(@() blob.get_data(), 'caffe:invalidHandle', 'reset_all');
E(@() weights.set_data(zeros(3, 2)), 'caffe:invalidHandle', 'reset_all');
E(@() layer.type(), 'caffe:invalidHandle', {'caffe.Layer', 'reset_all'});
E(@() net.save(tempname()), 'caffe:invalidHandle', 'reset_all');
clear net blob layer weights  % their delete() must not fail either

% Deleting the Octave object frees the net: nothing left for reset_all.
net = caffe.Net(model, 'test');
net.forward({single([1; 2; 3])});
assert(caffe.caffe_('handle_count') == 1 + numel(net.layer_vec) + ...
       numel(net.blob_vec) + 2, 'one handle per object (2 params)');
clear net
assert(caffe.caffe_('handle_count') == 0, ...
       'every Net, Layer and Blob object released its handle');
c = caffe.reset_all();
assert(c.nets == 0, 'a deleted net is freed at once (%d left)', c.nets);

% A blob keeps its net alive after the net object is gone.
net = caffe.Net(model, 'test');
net.params('ip', 1).set_data(ones(3, 2));
out = net.blobs('ip');
clear net
out_net_alive = caffe.reset_all();
assert(out_net_alive.nets == 1, 'the blob kept its net');
E(@() out.get_data(), 'caffe:invalidHandle', 'reset_all');
net = caffe.Net(model, 'test');
net.params('ip', 1).set_data(ones(3, 2));
net.params('ip', 2).set_data(zeros(2, 1));
out = net.blobs('ip');
data = net.blobs('data');
clear net
data.set_data(single([1; 2; 3]));
% No net object left, but the blobs work (forward needs the net, so check
% the data round trip and the shape).
assert(isequal(data.get_data(), single([1; 2; 3])));
assert(isequal(out.shape(), [2 1]));
clear out data
c = caffe.reset_all();
assert(c.nets == 0, 'freed with its last blob');

% Solvers: the same rules; the solver's nets live with the solver.
solver = caffe.Solver(solver_file);
train_net = solver.net;
clear solver
train_net.forward_prefilled();
c = caffe.reset_all();
assert(c.solvers == 1 && c.nets == 0, 'the net kept its solver');
E(@() train_net.forward_prefilled(), 'caffe:invalidHandle', 'reset_all');
solver = caffe.Solver(solver_file);
solver.step(1);
clear solver
c = caffe.reset_all();
assert(c.solvers == 0, 'a deleted solver is freed');

% After a reset everything works as before.
net = caffe.Net(model, 'test');
y = net.forward({single([1; 2; 3])});
assert(isequal(size(y{1}), [2 1]));
end
