function net = get_net(varargin)
% net = caffe.get_net(model_file, phase_name)
% net = caffe.get_net(model_file, weights_file, phase_name)
%   Builds a caffe.Net from a prototxt for phase 'train' or 'test' and, with
%   a weights file, loads its weights (copy_from).

if nargin ~= 2 && nargin ~= 3
  error('caffe:usage', ['usage: net = caffe.get_net(model_file, phase_name) ' ...
                        'or caffe.get_net(model_file, weights_file, phase_name)']);
end
model_file = varargin{1};
phase_name = varargin{end};
caffe.Net.check_string(model_file, 'get_net', 'model_file');
caffe.Net.check_string(phase_name, 'get_net', 'phase_name');
if ~any(strcmp(phase_name, {'train', 'test'}))
  error('caffe:invalidArgument', ...
        'caffe.get_net: phase_name must be ''train'' or ''test'', got ''%s''', ...
        phase_name);
end
if nargin == 3
  caffe.Net.check_string(varargin{2}, 'get_net', 'weights_file');
end

net = caffe.Net(caffe.caffe_('get_net', model_file, phase_name));
if nargin == 3
  net.copy_from(varargin{2});
end
end
