function d = source_dir()
% d = caffe.test.source_dir(): the repository root (for models/):
% $POSEIDON_SOURCE_DIR, else the current folder.

d = getenv('POSEIDON_SOURCE_DIR');
if isempty(d)
  d = pwd();
end
if ~exist(fullfile(d, 'models', 'lenet', 'train_val.prototxt'), 'file')
  error('caffe:testFailed', ['models/lenet is not under %s: run from ' ...
        'the repository root or set POSEIDON_SOURCE_DIR'], d);
end
end
