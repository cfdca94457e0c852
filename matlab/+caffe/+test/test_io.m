function test_io()
% caffe.io: load_image gives width x height x channels, BGR, single;
% write_mean/read_mean round trip; read_mean reads compute_image_mean's
% output as the per-pixel mean computed here (width first).

dir_name = tempname();
mkdir(dir_name);
cleanup = onCleanup(@() caffe.test.remove_dir(dir_name));

% A 3-high, 4-wide RGB image with every value distinct.
rgb = uint8(reshape(1:36, 3, 4, 3) * 7);
file = fullfile(dir_name, 'rgb.png');
imwrite(rgb, file);
im = caffe.io.load_image(file);
assert(isa(im, 'single') && isequal(size(im), [4 3 3]), 'size %s', ...
       mat2str(size(im)));
for x = 1:4
  for y = 1:3
    for c = 1:3
      assert(im(x, y, c) == rgb(y, x, 4 - c), 'pixel (%d, %d, %d)', x, y, c);
    end
  end
end
gray = magic(4);
gray = uint8(gray(1:3, :) * 10);
file = fullfile(dir_name, 'gray.png');
imwrite(gray, file);
im = caffe.io.load_image(file);
assert(isequal(size(im), [4 3]) && isequal(im, single(gray')));
caffe.test.expect_error(@() caffe.io.load_image(fullfile(dir_name, 'no.png')), ...
                        'caffe:fileError', 'no.png');

% Mean files.
mean_data = 255 * rand(20, 30, 3, 'single');
mean_file = fullfile(dir_name, 'mean.binaryproto');
caffe.io.write_mean(mean_data, mean_file);
assert(isequal(caffe.io.read_mean(mean_file), mean_data), 'mean round trip');
caffe.test.expect_error(@() caffe.io.write_mean(double(mean_data), mean_file), ...
                        'caffe:invalidArgument', 'single');

[images, labels] = caffe.test.fashion_mnist('test', 50);
db = caffe.test.mnist_lmdb(dir_name, 'lmdb', images, labels);
computed = fullfile(dir_name, 'computed.binaryproto');
caffe.test.run_tool('compute_image_mean', db, computed);
m = caffe.io.read_mean(computed);
assert(isequal(size(m), [28 28]), 'a 1-channel mean is 28 x 28, got %s', ...
       mat2str(size(m)));
assert(double(m), mean(double(images), 3), 1e-3);
end
