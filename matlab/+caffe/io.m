classdef io
  % caffe.io: image and mean-file helpers, in matcaffe's layout
  % (width x height x channels, channels BGR).

  methods (Static)
    function im_data = load_image(im_file)
      % im_data = caffe.io.load_image(file): the image as single,
      % width x height x channels, channels BGR for colour images (what a
      % net trained by Caffe on OpenCV-decoded images expects), values
      % 0..255 for 8-bit images.
      caffe.Net.check_string(im_file, 'load_image', 'im_file');
      if ~exist(im_file, 'file')
        error('caffe:fileError', 'caffe.io.load_image: cannot find %s', ...
              im_file);
      end
      im_data = imread(im_file);
      if size(im_data, 3) == 3
        im_data = im_data(:, :, [3, 2, 1]);
      end
      im_data = single(permute(im_data, [2, 1, 3]));
    end

    function mean_data = read_mean(mean_proto_file)
      % mean_data = caffe.io.read_mean(file): a mean .binaryproto (as made
      % by compute_image_mean) as single width x height x channels.
      caffe.Net.check_string(mean_proto_file, 'read_mean', ...
                             'mean_proto_file');
      mean_data = caffe.caffe_('read_mean', mean_proto_file);
    end

    function write_mean(mean_data, mean_proto_file)
      % caffe.io.write_mean(mean_data, file): writes width x height x
      % channels data as a 1 x C x H x W mean .binaryproto.
      if ~isa(mean_data, 'single')
        error('caffe:invalidArgument', ...
              'caffe.io.write_mean: mean_data must be single, got %s', ...
              class(mean_data));
      end
      caffe.Net.check_string(mean_proto_file, 'write_mean', ...
                             'mean_proto_file');
      caffe.caffe_('write_mean', mean_data, mean_proto_file);
    end
  end
end
