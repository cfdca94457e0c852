function test_errors()
% Bad input anywhere in the API is an Octave error with a caffe:* id and a
% message naming what was wrong, never a crash: prototxt and file errors
% from the core, names, indices, sizes and shapes checked before the core
% sees them, forged handles, and commands the MEX does not know. Octave
% then goes on working (the last forward below).

dir_name = tempname();
mkdir(dir_name);
cleanup = onCleanup(@() caffe.test.remove_dir(dir_name));
write = @(lines) caffe.test.write_file(lines, dir_name);
good = write({
  'name: "e"'
  'layer { name: "in" type: "Input" top: "data" top: "label"'
  '  input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }'
  'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"'
  '  inner_product_param { num_output: 4 } }'
  'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"'
  '  top: "loss" }'
});
E = @caffe.test.expect_error;

% Prototxt and files: the core's messages, with file:line:column.
syntax = write({'name: "bad"', 'layer {', '  name: "x" type "Input"', '}'});
[~, base] = fileparts(syntax);
E(@() caffe.Net(syntax, 'test'), 'caffe:configError', {base, ':3:'});
unknown = write({'layer { name: "x" type: "NoSuchLayer" top: "y" }'});
E(@() caffe.Net(unknown, 'test'), 'caffe:configError', 'NoSuchLayer');
field = write({'layer { name: "x" type: "Input" top: "y" no_such_field: 1 }'});
E(@() caffe.Net(field, 'test'), 'caffe:configError', 'no_such_field');
bottom = write({'layer { name: "x" type: "ReLU" bottom: "nothing" top: "y" }'});
E(@() caffe.Net(bottom, 'test'), 'caffe:configError', 'nothing');
E(@() caffe.Net(fullfile(dir_name, 'missing.prototxt'), 'test'), ...
  'caffe:fileError', 'missing.prototxt');
E(@() caffe.Net(good, fullfile(dir_name, 'missing.caffemodel'), 'test'), ...
  'caffe:fileError', 'missing.caffemodel');
garbage = write({'this is not a caffemodel'});
E(@() caffe.Net(good, garbage, 'test'), 'caffe:fileError', garbage);
E(@() caffe.Solver(fullfile(dir_name, 'missing_solver.prototxt')), ...
  'caffe:fileError', 'missing_solver.prototxt');
solver = write({['net: "' fullfile(dir_name, 'nonet.prototxt') '"']});
E(@() caffe.Solver(solver), 'caffe:fileError', 'nonet.prototxt');
% A mean file whose stored diff is shorter than its data (a corrupt
% BlobProto: 1x1x1x2, 2 data values, 3 diff values).
bad_mean = fullfile(dir_name, 'bad_mean.binaryproto');
fid = fopen(bad_mean, 'w');
fwrite(fid, [8 1 16 1 24 1 32 2 42 8], 'uint8');
fwrite(fid, [1 2], 'single');
fwrite(fid, [50 12], 'uint8');
fwrite(fid, [1 2 3], 'single');
fclose(fid);
E(@() caffe.io.read_mean(bad_mean), 'caffe:fileError', 'diff');

% Arguments checked by the package and the MEX.
E(@() caffe.Net(good, 'validation'), 'caffe:invalidArgument', 'validation');
E(@() caffe.Net(good), 'caffe:usage');
E(@() caffe.Net(42, 'test'), 'caffe:invalidArgument', 'model_file');
net = caffe.Net(good, 'train');
E(@() net.blobs('nope'), 'caffe:unknownName', {'nope', 'data, label, ip, loss'});
E(@() net.layers('nope'), 'caffe:unknownName', 'in, ip, loss');
E(@() net.params('ip', 3), 'caffe:indexOutOfRange', 'ip');
E(@() net.params('ip', 0), 'caffe:indexOutOfRange');
E(@() net.params('loss', 1), 'caffe:indexOutOfRange', 'loss');
data = net.blobs('data');
E(@() data.set_data(zeros(2, 3)), 'caffe:shapeError', {'[2 3]', '[3 2]'});
E(@() data.set_data(zeros(3, 2, 2)), 'caffe:shapeError');
E(@() data.set_diff(zeros(6, 1)), 'caffe:shapeError');
E(@() data.set_data('abcdef'), 'caffe:invalidArgument', 'char');
E(@() data.set_data({1, 2}), 'caffe:invalidArgument', 'cell');
E(@() data.set_data(complex(zeros(3, 2), 1)), 'caffe:invalidArgument');
E(@() data.reshape([3 -2]), 'caffe:shapeError', '-2');
E(@() data.reshape([3 NaN]), 'caffe:shapeError', 'element 2');
E(@() data.reshape([3 1.5]), 'caffe:shapeError', '1.5');
E(@() data.reshape(ones(1, 33)), 'caffe:shapeError', '33');
E(@() data.reshape([65536 65536]), 'caffe:shapeError', 'INT_MAX');
E(@() data.reshape('ab'), 'caffe:invalidArgument');
E(@() net.forward(zeros(3, 2)), 'caffe:invalidArgument', 'cell');
E(@() net.forward({zeros(3, 2)}), 'caffe:invalidArgument', 'data, label');
E(@() net.forward({zeros(3, 3), zeros(2, 1)}), 'caffe:shapeError');
E(@() net.save(42), 'caffe:invalidArgument', 'weights_file');
% A label out of range reaches the layer, which refuses it (no CHECK).
net.blobs('label').set_data([0; 9]);
E(@() net.forward_prefilled(), 'caffe:configError', '9');

% Process settings.
E(@() caffe.set_device(-1), 'caffe:invalidArgument', 'device_id');
E(@() caffe.set_device(0.5), 'caffe:invalidArgument', 'device_id');
E(@() caffe.set_random_seed('x'), 'caffe:invalidArgument');
E(@() caffe.init_log(7), 'caffe:invalidArgument', 'level');
try
  caffe.set_mode_gpu();  % fine where there is a GPU, an error otherwise
catch err
  assert(strncmp(err.identifier, 'caffe:', 6) && ~isempty(err.message), ...
         'set_mode_gpu failed with %s: %s', err.identifier, err.message);
end
caffe.set_mode_cpu();

% The MEX module itself: unknown commands, wrong argument counts, handles
% of the wrong kind, forged or released handles.
E(@() caffe.caffe_(), 'caffe:usage');
E(@() caffe.caffe_('no_such_command'), 'caffe:usage', 'no_such_command');
E(@() caffe.caffe_('net_forward'), 'caffe:usage', 'hNet');
E(@() caffe.caffe_(17), 'caffe:invalidArgument', 'command');
h = caffe.caffe_('get_net', good, 'test');
attr = caffe.caffe_('net_get_attr', h);
blob_handle = attr.hBlob_blobs(1);
E(@() caffe.caffe_('net_forward', blob_handle), 'caffe:invalidHandle', ...
  'not a caffe.Blob');
E(@() caffe.caffe_('blob_get_data', h), 'caffe:invalidHandle', ...
  'not a caffe.Net');
forged = struct('id', uint64(123456789), 'init_key', h.init_key);
E(@() caffe.caffe_('net_forward', forged), 'caffe:invalidHandle', 'released');
E(@() caffe.caffe_('net_forward', struct('id', 1)), 'caffe:invalidHandle');
E(@() caffe.caffe_('net_forward', 3), 'caffe:invalidHandle');
E(@() caffe.caffe_('blob_get_data', setfield(blob_handle, 'init_key', 1)), ...
  'caffe:invalidHandle', 'reset_all');
E(@() caffe.caffe_('blob_set_data', blob_handle, zeros(3, 2)), ...
  'caffe:invalidArgument', 'single');
E(@() caffe.caffe_('blob_reshape', blob_handle, int32([2 3])), ...
  'caffe:invalidArgument', 'double');
E(@() caffe.caffe_('solver_step', h, 1), 'caffe:invalidHandle', 'Solver');
E(@() caffe.caffe_('write_mean', zeros(2, 2), 'f'), 'caffe:invalidArgument');
caffe.caffe_('release', h);
E(@() caffe.caffe_('net_forward', h), 'caffe:invalidHandle', 'released');
caffe.caffe_('release', h);          % twice: ignored
caffe.caffe_('release', 'garbage');  % not a handle: ignored
% The blob handle keeps the net alive after the net's handle is gone.
assert(isequal(size(caffe.caffe_('blob_get_data', blob_handle)), [3 2]));
caffe.caffe_('release', attr.hBlob_blobs);
caffe.caffe_('release', attr.hLayer_layers);

% Octave is still fine, and so is the net that raised errors above.
net.blobs('label').set_data([0; 3]);
net.blobs('data').set_data(ones(3, 2));
loss = net.forward_prefilled();
assert(isfinite(loss) && loss > 0, 'loss %g', loss);
end
