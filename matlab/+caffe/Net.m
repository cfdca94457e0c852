classdef Net < handle
  % caffe.Net: a network of Poseidon's C++ core.
  %
  %   net = caffe.Net(model_file, phase_name)           % 'train' or 'test'
  %   net = caffe.Net(model_file, weights_file, phase_name)
  %
  %   out = net.forward({data1, ...})  % inputs in net.inputs order, each
  %                                    % W x H x C x N; returns a cell of the
  %                                    % outputs in net.outputs order
  %   net.blobs('name').get_data()     % any blob, as a caffe.Blob
  %   net.params('layer', i)           % i-th learnable blob of a layer
  %   net.forward_prefilled(); net.backward_prefilled();
  %   net.copy_from(weights_file); net.save(weights_file); net.reshape();
  %
  % The C++ net lives as long as this object or any caffe.Layer/caffe.Blob
  % taken from it (or until caffe.reset_all()).

  % Hidden rather than private: Octave denies private access to objects
  % made before a `clear functions`, and delete() must still reach it.
  properties (Hidden, SetAccess = private)
    hNet_self
  end
  properties (SetAccess = private)
    layer_vec          % caffe.Layer array, in net order
    blob_vec           % caffe.Blob array, in net order
    inputs             % cell of input blob names
    outputs            % cell of output blob names
    name2layer_index   % containers.Map: layer name -> index in layer_vec
    name2blob_index    % containers.Map: blob name -> index in blob_vec
    layer_names        % cell of layer names
    blob_names         % cell of blob names
    name               % the net's name
  end

  methods
    function self = Net(varargin)
      if ~(nargin == 1 && isstruct(varargin{1}))
        % caffe.Net(model_file, [weights_file,] phase_name)
        self = caffe.get_net(varargin{:});
        return
      end
      hNet_net = varargin{1};
      if ~caffe.Net.is_handle(hNet_net)
        error('caffe:invalidHandle', 'caffe.Net: invalid Net handle');
      end
      self.hNet_self = hNet_net;
      a = caffe.caffe_('net_get_attr', self.hNet_self);

      self.layer_vec = caffe.Layer.empty_array();
      for n = 1:numel(a.hLayer_layers)
        self.layer_vec(n) = caffe.Layer(a.hLayer_layers(n));
      end
      self.blob_vec = caffe.Blob.empty_array();
      for n = 1:numel(a.hBlob_blobs)
        self.blob_vec(n) = caffe.Blob(a.hBlob_blobs(n));
      end

      self.layer_names = a.layer_names;
      self.blob_names = a.blob_names;
      self.inputs = a.blob_names(a.input_blob_indices);
      self.outputs = a.blob_names(a.output_blob_indices);
      self.name = a.name;
      self.name2layer_index = caffe.Net.index_map(a.layer_names);
      self.name2blob_index = caffe.Net.index_map(a.blob_names);
    end

    function delete(self)
      if ~isempty(self.hNet_self)
        try
          caffe.caffe_('release', self.hNet_self);
        catch
        end
      end
    end

    function layer = layers(self, layer_name)
      % layer = net.layers(name): the caffe.Layer named `name`.
      layer = self.layer_vec(self.lookup(self.name2layer_index, layer_name, ...
                                         'layer', self.layer_names));
    end

    function blob = blobs(self, blob_name)
      % blob = net.blobs(name): the caffe.Blob named `name`.
      blob = self.blob_vec(self.lookup(self.name2blob_index, blob_name, ...
                                       'blob', self.blob_names));
    end

    function blob = params(self, layer_name, blob_index)
      % blob = net.params(layer_name, i): the layer's i-th learnable blob.
      layer = self.layers(layer_name);
      n = numel(layer.params);
      if ~(isnumeric(blob_index) && isscalar(blob_index) && ...
           blob_index == fix(blob_index) && blob_index >= 1 && blob_index <= n)
        error('caffe:indexOutOfRange', ['caffe.Net.params: layer ''%s'' ' ...
              'has %d learnable blobs; index %s is out of range'], ...
              layer_name, n, mat2str(blob_index));
      end
      blob = layer.params(blob_index);
    end

    function varargout = forward_prefilled(self)
      % net.forward_prefilled(): forward with the data already in the input
      % blobs; loss = net.forward_prefilled() returns the weighted loss.
      loss = caffe.caffe_('net_forward', self.hNet_self);
      if nargout > 0
        varargout{1} = loss;
      end
    end

    function backward_prefilled(self)
      % net.backward_prefilled(): backward from the diffs already set.
      caffe.caffe_('net_backward', self.hNet_self);
    end

    function res = forward(self, input_data)
      % res = net.forward({in1, in2, ...}): copies the arrays into the input
      % blobs (sizes must match; reshape the blobs first to change them),
      % runs forward, returns the output blobs' data as a cell.
      caffe.Net.check_cell(input_data, self.inputs, 'forward', 'input_data');
      for n = 1:numel(self.inputs)
        self.blobs(self.inputs{n}).set_data(input_data{n});
      end
      self.forward_prefilled();
      res = cell(numel(self.outputs), 1);
      for n = 1:numel(self.outputs)
        res{n} = self.blobs(self.outputs{n}).get_data();
      end
    end

    function res = backward(self, output_diff)
      % res = net.backward({diff1, ...}): sets the output blobs' diffs, runs
      % backward, returns the input blobs' diffs as a cell.
      caffe.Net.check_cell(output_diff, self.outputs, 'backward', ...
                           'output_diff');
      for n = 1:numel(self.outputs)
        self.blobs(self.outputs{n}).set_diff(output_diff{n});
      end
      self.backward_prefilled();
      res = cell(numel(self.inputs), 1);
      for n = 1:numel(self.inputs)
        res{n} = self.blobs(self.inputs{n}).get_diff();
      end
    end

    function copy_from(self, weights_file)
      % net.copy_from(file): loads weights (.caffemodel) by layer name.
      caffe.Net.check_string(weights_file, 'copy_from', 'weights_file');
      caffe.caffe_('net_copy_from', self.hNet_self, weights_file);
    end

    function share_with(self, other)
      % net.share_with(other): this net's layers use the weights of the
      % layers of the same name in `other` (no copy).
      if ~isa(other, 'caffe.Net')
        error('caffe:invalidArgument', ...
              'caffe.Net.share_with: other must be a caffe.Net');
      end
      caffe.caffe_('net_share_trained_layers_with', self.hNet_self, ...
                   other.hNet_self);
    end

    function reshape(self)
      % net.reshape(): propagates changed input blob shapes through the net.
      caffe.caffe_('net_reshape', self.hNet_self);
    end

    function save(self, weights_file)
      % net.save(file): writes the weights as a binary .caffemodel.
      caffe.Net.check_string(weights_file, 'save', 'weights_file');
      caffe.caffe_('net_save', self.hNet_self, weights_file);
    end
  end

  methods (Static, Hidden)
    function check_cell(c, names, method, what)
      if ~iscell(c)
        error('caffe:invalidArgument', ...
              'caffe.Net.%s: %s must be a cell array', method, what);
      end
      if numel(c) ~= numel(names)
        error('caffe:invalidArgument', ...
              'caffe.Net.%s: %s has %d arrays; the net has %d (%s)', ...
              method, what, numel(c), numel(names), strjoin(names', ', '));
      end
    end

    function valid = is_handle(h)
      % True for a structurally valid handle; the MEX checks the rest.
      valid = isstruct(h) && isscalar(h) && isfield(h, 'id') && ...
              isfield(h, 'init_key') && isa(h.id, 'uint64') && ...
              isa(h.init_key, 'double');
    end

    function check_string(s, method, what)
      if ~(ischar(s) && (isrow(s) || isempty(s)))
        error('caffe:invalidArgument', ...
              'caffe.Net.%s: %s must be a string', method, what);
      end
    end

    function m = index_map(names)
      m = containers.Map('KeyType', 'char', 'ValueType', 'double');
      for n = 1:numel(names)
        m(names{n}) = n;
      end
    end

    function idx = lookup(map, key, kind, names)
      if ~(ischar(key) && (isrow(key) || isempty(key)))
        error('caffe:invalidArgument', '%s name must be a string', kind);
      end
      if ~isKey(map, key)
        error('caffe:unknownName', 'the net has no %s ''%s''; its %ss: %s', ...
              kind, key, kind, strjoin(names', ', '));
      end
      idx = map(key);
    end
  end
end
