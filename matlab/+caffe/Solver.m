classdef Solver < handle
  % caffe.Solver: trains a net as described by a solver prototxt.
  %
  %   solver = caffe.Solver(solver_file)   % or caffe.get_solver(solver_file)
  %   solver.step(n); solver.solve(); solver.iter()
  %   solver.net, solver.test_nets(i)      % caffe.Net objects
  %   solver.snapshot(); solver.restore(solverstate_file)
  %
  % The solver's `type` (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)
  % picks the update rule, as in Caffe's tools.

  % Hidden rather than private: Octave denies private access to objects
  % made before a `clear functions`, and delete() must still reach it.
  properties (Hidden, SetAccess = private)
    hSolver_self
  end
  properties (SetAccess = private)
    net        % the training net, a caffe.Net
    test_nets  % the test nets, a caffe.Net array (maybe empty)
    type       % the solver type string, e.g. 'SGD'
  end

  methods
    function self = Solver(varargin)
      if ~(nargin == 1 && isstruct(varargin{1}))
        self = caffe.get_solver(varargin{:});
        return
      end
      hSolver_solver = varargin{1};
      if ~caffe.Net.is_handle(hSolver_solver)
        error('caffe:invalidHandle', 'caffe.Solver: invalid Solver handle');
      end
      self.hSolver_self = hSolver_solver;
      attr = caffe.caffe_('solver_get_attr', self.hSolver_self);
      self.type = attr.type;
      self.net = caffe.Net(attr.hNet_net);
      self.test_nets = self.net([]);
      for n = 1:numel(attr.hNet_test_nets)
        self.test_nets(n) = caffe.Net(attr.hNet_test_nets(n));
      end
    end

    function delete(self)
      if ~isempty(self.hSolver_self)
        try
          caffe.caffe_('release', self.hSolver_self);
        catch
        end
      end
    end

    function iter = iter(self)
      % The number of iterations done so far.
      iter = caffe.caffe_('solver_get_iter', self.hSolver_self);
    end

    function max_iter = max_iter(self)
      max_iter = caffe.caffe_('solver_get_max_iter', self.hSolver_self);
    end

    function restore(self, snapshot_filename)
      % solver.restore(file): resumes from a .solverstate (and the weights
      % it names).
      caffe.Net.check_string(snapshot_filename, 'restore', ...
                             'snapshot_filename');
      caffe.caffe_('solver_restore', self.hSolver_self, snapshot_filename);
    end

    function solve(self)
      % solver.solve(): trains until max_iter (testing and snapshotting as
      % the solver prototxt says).
      caffe.caffe_('solver_solve', self.hSolver_self);
    end

    function step(self, iters)
      % solver.step(n): n training iterations.
      if ~(isnumeric(iters) && isscalar(iters) && iters >= 0 && ...
           iters == fix(iters))
        error('caffe:invalidArgument', ...
              'caffe.Solver.step: iters must be a non-negative integer');
      end
      caffe.caffe_('solver_step', self.hSolver_self, double(iters));
    end

    function state_file = snapshot(self)
      % state_file = solver.snapshot(): writes <prefix>_iter_<N>.caffemodel
      % and .solverstate; returns the .solverstate's name.
      state_file = caffe.caffe_('solver_snapshot', self.hSolver_self);
    end
  end
end
