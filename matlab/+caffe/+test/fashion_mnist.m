function [images, labels] = fashion_mnist(split, n)
% [images, labels] = caffe.test.fashion_mnist(split, n)
%   The first n examples of Fashion-MNIST's 'train' or 'test' split, read
%   from the Debian package dataset-fashion-mnist: images 28 x 28 x n uint8
%   in matcaffe's layout (width first), labels n x 1 double.

src = '/usr/share/datasets/fashion-mnist';
if strcmp(split, 'train')
  prefix = 'train';
else
  prefix = 't10k';
end
tmp = tempname();
mkdir(tmp);
cleanup = onCleanup(@() caffe.test.remove_dir(tmp));

image_file = read_idx_header(src, [prefix '-images-idx3-ubyte'], tmp);
fid = fopen(image_file, 'r');
header = fread(fid, 4, 'int32', 0, 'ieee-be');
if header(1) ~= 2051 || header(2) < n || any(header(3:4) ~= 28)
  fclose(fid);
  error('caffe:testFailed', '%s is not a 28x28 idx image file with %d images', ...
        image_file, n);
end
images = reshape(fread(fid, 28 * 28 * n, 'uint8=>uint8'), 28, 28, n);
fclose(fid);

label_file = read_idx_header(src, [prefix '-labels-idx1-ubyte'], tmp);
fid = fopen(label_file, 'r');
header = fread(fid, 2, 'int32', 0, 'ieee-be');
if header(1) ~= 2049 || header(2) < n
  fclose(fid);
  error('caffe:testFailed', '%s is not an idx label file with %d labels', ...
        label_file, n);
end
labels = fread(fid, n, 'uint8');
fclose(fid);
end

function file = read_idx_header(src, name, tmp)
% The uncompressed idx file (gunzipped into tmp when only .gz exists).
file = fullfile(src, name);
if exist(file, 'file')
  return
end
gz = [file '.gz'];
if ~exist(gz, 'file')
  error('caffe:testFailed', ...
        'Fashion-MNIST is not in %s (Debian package dataset-fashion-mnist)', src);
end
gunzip(gz, tmp);
file = fullfile(tmp, name);
end
