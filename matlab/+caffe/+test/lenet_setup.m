function s = lenet_setup(num_train, num_test)
% s = caffe.test.lenet_setup(num_train, num_test)
%   A temporary folder with LMDBs of the first examples of Fashion-MNIST
%   (made by convert_mnist_data) and models/lenet/train_val.prototxt reading
%   them. s.dir, s.model, s.train_images/labels, s.test_images/labels;
%   s.solver(prefix, max_iter) writes a solver prototxt and returns its name.

s.dir = tempname();
mkdir(s.dir);
[s.train_images, s.train_labels] = caffe.test.fashion_mnist('train', num_train);
[s.test_images, s.test_labels] = caffe.test.fashion_mnist('test', num_test);
train_db = caffe.test.mnist_lmdb(s.dir, 'train_lmdb', s.train_images, ...
                                 s.train_labels);
test_db = caffe.test.mnist_lmdb(s.dir, 'test_lmdb', s.test_images, ...
                                s.test_labels);

text = fileread(fullfile(caffe.test.source_dir(), 'models', 'lenet', ...
                         'train_val.prototxt'));
text = strrep(text, 'data/fashion_mnist/fashion_mnist_train_lmdb', train_db);
text = strrep(text, 'data/fashion_mnist/fashion_mnist_test_lmdb', test_db);
if isempty(strfind(text, train_db)) || isempty(strfind(text, test_db))
  error('caffe:testFailed', ...
        'models/lenet/train_val.prototxt no longer names the Fashion-MNIST LMDBs');
end
s.model = fullfile(s.dir, 'lenet_train_val.prototxt');
fid = fopen(s.model, 'w');
fputs(fid, text);
fclose(fid);
s.solver = @(prefix, max_iter) write_solver(s, prefix, max_iter);
end

function file = write_solver(s, prefix, max_iter)
file = fullfile(s.dir, [prefix '_solver.prototxt']);
fid = fopen(file, 'w');
fprintf(fid, 'net: "%s"\n', s.model);
fprintf(fid, 'test_iter: 2\ntest_interval: 100000\ntest_initialization: false\n');
fprintf(fid, 'base_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n');
fprintf(fid, 'lr_policy: "fixed"\ndisplay: 0\nmax_iter: %d\n', max_iter);
fprintf(fid, 'snapshot_prefix: "%s"\nrandom_seed: 1\nsolver_mode: CPU\n', ...
        fullfile(s.dir, prefix));
fclose(fid);
end
