function set_mode_cpu()
% caffe.set_mode_cpu(): compute on the CPU (the default).

caffe.caffe_('set_mode_cpu');
end
