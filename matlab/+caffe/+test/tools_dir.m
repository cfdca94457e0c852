function d = tools_dir()
% d = caffe.test.tools_dir(): the folder holding convert_mnist_data,
% compute_image_mean and poseidon_train: $POSEIDON_TOOLS, else <build>/tools
% for the build tree this package was loaded from (<build>/matlab).

d = getenv('POSEIDON_TOOLS');
if isempty(d)
  pkg = fileparts(which('caffe.version'));          % <build>/matlab/+caffe
  d = fullfile(fileparts(fileparts(pkg)), 'tools');
end
if ~exist(fullfile(d, 'convert_mnist_data'), 'file')
  error('caffe:testFailed', ...
        'Poseidon''s tools are not in %s: build them or set POSEIDON_TOOLS', d);
end
end
