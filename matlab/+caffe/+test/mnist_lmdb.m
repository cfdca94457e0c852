function db = mnist_lmdb(dir_name, name, images, labels)
% db = caffe.test.mnist_lmdb(dir_name, name, images, labels)
%   Writes images (28 x 28 x n uint8, width first) and labels as MNIST idx
%   files and converts them with Poseidon's convert_mnist_data into the
%   LMDB dir_name/name; returns its path.

n = size(images, 3);
image_file = fullfile(dir_name, [name '-images-idx3-ubyte']);
fid = fopen(image_file, 'w');
fwrite(fid, [2051; n; 28; 28], 'int32', 0, 'ieee-be');
fwrite(fid, images(:), 'uint8');
fclose(fid);
label_file = fullfile(dir_name, [name '-labels-idx1-ubyte']);
fid = fopen(label_file, 'w');
fwrite(fid, [2049; n], 'int32', 0, 'ieee-be');
fwrite(fid, labels(:), 'uint8');
fclose(fid);
db = fullfile(dir_name, name);
caffe.test.run_tool('convert_mnist_data', image_file, label_file, db);
end
