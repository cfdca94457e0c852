function set_device(device_id)
% caffe.set_device(device_id): the GPU to use (0-based, as in Caffe).

if nargin ~= 1
  error('caffe:usage', 'usage: caffe.set_device(device_id)');
end
caffe.caffe_('set_device', device_id);
end
