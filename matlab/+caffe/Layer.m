classdef Layer < handle
  % caffe.Layer: one layer of a caffe.Net (net.layers('name') or
  % net.layer_vec(i)). layer.params(i) is its i-th learnable blob (for
  % Convolution and InnerProduct: 1 weights, 2 bias), a caffe.Blob.

  % Hidden rather than private: Octave denies private access to objects
  % made before a `clear functions`, and delete() must still reach it.
  properties (Hidden, SetAccess = private)
    hLayer_self
  end
  properties (SetAccess = private)
    params  % caffe.Blob array, one per learnable blob
    name    % the layer's name in the prototxt
  end

  methods
    function self = Layer(hLayer_layer)
      if nargin == 0
        self.params = caffe.Blob.empty_array();
        return
      end
      if ~caffe.Net.is_handle(hLayer_layer)
        error('caffe:invalidHandle', 'caffe.Layer: invalid Layer handle');
      end
      self.hLayer_self = hLayer_layer;
      attr = caffe.caffe_('layer_get_attr', self.hLayer_self);
      self.name = attr.name;
      self.params = caffe.Blob.empty_array();
      for n = 1:numel(attr.hBlob_blobs)
        self.params(n) = caffe.Blob(attr.hBlob_blobs(n));
      end
    end

    function delete(self)
      if ~isempty(self.hLayer_self)
        try
          caffe.caffe_('release', self.hLayer_self);
        catch
        end
      end
    end

    function layer_type = type(self)
      % The prototxt type string: 'Convolution', 'InnerProduct', ...
      layer_type = caffe.caffe_('layer_get_type', self.hLayer_self);
    end
  end

  methods (Static, Hidden)
    function e = empty_array()
      l = caffe.Layer();
      e = l([]);
    end
  end
end
